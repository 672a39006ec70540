//! The web dashboard the controller serves at `[web] listen`: the pool now, the queue with each
//! job's reason and estimated start, my jobs with their output and cancel, a job's detail, my
//! credits, quota and usage, datasets and caches, snapshots (find and restore my files), and
//! alerts for admins.
//!
//! Decisions, for the next engineer:
//! - Pages are rendered on the server (maud), with one small script that refreshes live pages
//!   in place; there is no build step and nothing is fetched from outside.
//! - Every read and action goes through the controller's API as the session's uid
//!   ([`api_call`]), so a page follows the CLI's rules exactly.
//! - Login is Jupyter's: a one-time, short-lived URL from `labpool web` ([`auth`]); sessions live
//!   in memory. The listener is plain HTTP on loopback by default; reach it through `ssh -L`.
//! - A job's output is shown to its owner and to admins, read by the controller only when the
//!   file belongs to the job's owner and is not a link ([`output_tail`]).
//! - It is a crate of its own, below the controller: the controller starts it with its API
//!   router and issues its login tokens (`POST /v1/web/login`); the dashboard never imports the
//!   controller.

// The paths these files were written with, from when they were modules of the binary.
use labpool_api as api;
use labpool_host::{clock, identity, member_file};
use labpool_link::{link_auth, socket, tunnel};
use labpool_settings as settings;

pub mod api_call;
pub mod auth;
pub mod i18n;
pub mod layout;
pub mod notebooks;
pub mod output_tail;
mod pages;
mod session;

pub use session::local_path;

use api_call::Api;
use auth::Logins;
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use std::sync::Arc;
use tokio::sync::watch;

/// What the dashboard's handlers reach.
#[derive(Clone)]
pub struct WebState {
    /// The API, called as the session's uid.
    pub api: Api,
    /// Login tokens and sessions.
    pub logins: Arc<Logins>,
    /// The config (for the admin group).
    pub config: Arc<crate::settings::Config>,
    /// Tunnels to jobs' ports, opened as a member (notebooks).
    pub tunnels: Arc<dyn labpool_link::tunnel::JobTunnels>,
    /// Notebook grants and connections kept between requests.
    pub notebooks: Arc<notebooks::Links>,
}

/// The dashboard's routes.
pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/login", get(session::login))
        .route("/logout", post(session::logout))
        .route("/static/style.css", get(style))
        .route("/static/refresh.js", get(script))
        .merge(pages::routes())
        .fallback(session::not_found)
        .layer(axum::middleware::map_response(secure_headers))
        // JupyterLab's pages carry JupyterLab's own headers.
        .merge(notebooks::routes())
        .with_state(state)
}

/// Serves the dashboard until `stop`, and records its address for `labpool web`. A port that
/// cannot be bound is logged with the fix; the controller runs on without a dashboard.
pub async fn serve(
    addr: &str,
    state: WebState,
    state_dir: &std::path::Path,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(
                "cannot serve the web dashboard on {addr}: {e}; set listen under [web] in {} to a free port, or \"off\"",
                state.config.path.display()
            );
            return;
        }
    };
    let Ok(bound) = listener.local_addr() else {
        return;
    };
    // A wildcard address is no place to browse to: name this host instead. Otherwise the
    // address as bound, which SocketAddr writes with brackets for IPv6.
    let base = if bound.ip().is_unspecified() {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into());
        format!("http://{host}:{}", bound.port())
    } else {
        format!("http://{bound}")
    };
    state.logins.set_base(base);
    let path = state_dir.join("web.addr");
    if let Err(e) = std::fs::write(&path, format!("{bound}\n")) {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
    let app = router(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
    });
    tracing::info!(listen = %bound, "serving the web dashboard");
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/style.css"),
    )
        .into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/refresh.js"),
    )
        .into_response()
}

/// No outside content, no framing, no referrer to other sites (a login URL must not leak; our
/// own forms keep their Origin header), no caching of pages that show a member's data.
async fn secure_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    let set = |h: &mut axum::http::HeaderMap, k: &'static str, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        h,
        "content-security-policy",
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(h, "x-content-type-options", "nosniff");
    set(h, "referrer-policy", "same-origin");
    set(h, "x-frame-options", "DENY");
    if !h.contains_key(header::CACHE_CONTROL) {
        set(h, "cache-control", "no-store");
    }
    resp
}

/// A status and a page, as a response.
pub fn respond(status: StatusCode, page: maud::Markup) -> Response {
    (status, page).into_response()
}

/// A redirect after a form (303: the browser follows with GET).
pub fn see_other(to: &str) -> Response {
    Redirect::to(to).into_response()
}
