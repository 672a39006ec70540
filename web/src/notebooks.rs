//! Notebooks in the browser: `/notebooks/JOB/…` is JupyterLab running in job JOB (`labpool
//! notebook`), proxied to the job's owner (and admins) only, WebSockets included, behind the
//! dashboard's own login. The notebook's token never reaches the browser: the proxy shows it to
//! JupyterLab on each request (`Authorization: token …`), and the dashboard's session cookie
//! never reaches JupyterLab. A member who may not open the notebook gets the dashboard's refusal
//! and no byte of it: the API is asked first, and no tunnel is opened otherwise.
//!
//! Requests go over tunnels to JupyterLab's port (`labpool_link::tunnel`, opened as the member
//! through the controller), which JupyterLab serves under the same path, so nothing is
//! rewritten. The API's grant is kept for a few seconds and connections are kept open per
//! member and notebook ([`Links`]): a page's many requests cost one tunnel, not one each. These routes are outside the dashboard's own security headers: JupyterLab sends
//! its own.

use crate::WebState;
use crate::api::sessions::NotebookView;
use crate::session::LoggedIn;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::any;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a member's right to a notebook, once the API granted it, is taken as still holding:
/// an ended or cancelled notebook stops answering sooner anyway.
const GRANT_FOR: Duration = Duration::from_secs(5);

/// Connections kept open to one notebook, for one member.
const KEPT_PER_NOTEBOOK: usize = 8;

/// What the proxy keeps between requests, per member and notebook: the API's grant (port and
/// token) for a few seconds, and open connections to JupyterLab, so that a page's many requests
/// do not each ask the API and open a tunnel.
#[derive(Default)]
pub struct Links {
    grants: Mutex<HashMap<Key, (NotebookView, Instant)>>,
    idle: Mutex<HashMap<Key, Vec<SendRequest<Body>>>>,
}

/// A member (uid) and a notebook (job).
type Key = (u32, u64);

impl Links {
    fn grant(&self, key: Key) -> Option<NotebookView> {
        let grants = self.grants.lock().unwrap_or_else(|p| p.into_inner());
        grants
            .get(&key)
            .filter(|(_, at)| at.elapsed() < GRANT_FOR)
            .map(|(v, _)| v.clone())
    }

    fn granted(&self, key: Key, view: &NotebookView) {
        let mut grants = self.grants.lock().unwrap_or_else(|p| p.into_inner());
        grants.retain(|_, (_, at)| at.elapsed() < GRANT_FOR);
        grants.insert(key, (view.clone(), Instant::now()));
    }

    /// A kept connection that can take a request now.
    fn take(&self, key: Key) -> Option<SendRequest<Body>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(&key)?;
        list.retain(|s| !s.is_closed());
        let i = list.iter().position(SendRequest::is_ready)?;
        Some(list.swap_remove(i))
    }

    /// Keeps `sender` for the next requests (it is ready again once its answer is read).
    fn keep(&self, key: Key, sender: SendRequest<Body>) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|_, list| {
            list.retain(|s| !s.is_closed());
            !list.is_empty()
        });
        let list = idle.entry(key).or_default();
        if list.len() < KEPT_PER_NOTEBOOK {
            list.push(sender);
        }
    }
}

/// The notebook routes.
pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/notebooks/{job}", any(proxy))
        .route("/notebooks/{job}/", any(proxy))
        .route("/notebooks/{job}/{*rest}", any(proxy))
}

/// The job a `/notebooks/JOB/…` path names.
fn job_of(path: &str) -> Option<u64> {
    path.strip_prefix("/notebooks/")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

fn plain(status: StatusCode, text: String) -> Response {
    (status, [(header::CACHE_CONTROL, "no-store")], text).into_response()
}

async fn proxy(State(state): State<WebState>, me: LoggedIn, mut req: Request) -> Response {
    let uid = me.ctx.uid;
    let path = req.uri().path().to_string();
    let Some(job) = job_of(&path) else {
        return plain(StatusCode::NOT_FOUND, "not a notebook path".into());
    };
    if path == format!("/notebooks/{job}") || path == format!("/notebooks/{job}/") {
        return Redirect::to(&format!("/notebooks/{job}/lab")).into_response();
    }
    let key = (uid, job);
    let view = match state.notebooks.grant(key) {
        Some(v) => v,
        None => match state
            .api
            .get::<NotebookView>(uid, &format!("/v1/jobs/{job}/notebook"))
            .await
        {
            Ok(v) => {
                state.notebooks.granted(key, &v);
                v
            }
            Err(r) => {
                let hint = r
                    .body
                    .hint
                    .map(|h| format!("\nhint: {h}"))
                    .unwrap_or_default();
                return plain(
                    StatusCode::from_u16(r.status).unwrap_or(StatusCode::FORBIDDEN),
                    format!("{}{hint}", r.body.error),
                );
            }
        },
    };
    let browser_upgrade = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
    let (parts, body) = req.into_parts();
    let mut out = hyper::Request::builder().method(parts.method.clone()).uri(
        parts
            .uri
            .path_and_query()
            .map_or(path.as_str(), |p| p.as_str()),
    );
    let upgrading = browser_upgrade.is_some();
    for (name, value) in &parts.headers {
        // The browser's connection is not JupyterLab's: its hop-by-hop headers stay here (a
        // WebSocket's upgrade goes on), so the proxy's own connection is kept alive.
        let hop = [
            header::CONNECTION,
            header::TE,
            header::TRAILER,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
        ]
        .contains(name)
            || name.as_str() == "keep-alive"
            || name.as_str() == "proxy-connection";
        if hop && !(upgrading && (name == header::CONNECTION || name == header::UPGRADE)) {
            continue;
        }
        if name == header::COOKIE {
            if let Some(kept) = without_dashboard_cookie(value) {
                out = out.header(header::COOKIE, kept);
            }
        } else if name != header::AUTHORIZATION {
            out = out.header(name, value);
        }
    }
    let Ok(token) = HeaderValue::from_str(&format!("token {}", view.token)) else {
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "a bad notebook token".into(),
        );
    };
    let Ok(out) = out.header(header::AUTHORIZATION, token).body(body) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "a request that cannot be passed on".into(),
        );
    };
    // A WebSocket takes a connection of its own; other requests reuse a kept one.
    let kept = if upgrading {
        None
    } else {
        state.notebooks.take(key)
    };
    let mut sender = match kept {
        Some(s) => s,
        None => match connect(&state, uid, job, view.port).await {
            Ok(s) => s,
            Err(resp) => return resp,
        },
    };
    let mut resp = match sender.send_request(out).await {
        Ok(r) => r,
        Err(e) => return plain(StatusCode::BAD_GATEWAY, format!("notebook {job}: {e}")),
    };
    if !upgrading {
        state.notebooks.keep(key, sender);
    }
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let (Some(browser), Some(notebook)) = (
            browser_upgrade,
            resp.extensions_mut().remove::<hyper::upgrade::OnUpgrade>(),
        ) else {
            return plain(
                StatusCode::BAD_GATEWAY,
                "the upgrade could not be passed on".into(),
            );
        };
        tokio::spawn(async move {
            if let (Ok(b), Ok(n)) = (browser.await, notebook.await) {
                crate::tunnel::splice(TokioIo::new(b), TokioIo::new(n)).await;
            }
        });
    }
    resp.map(Body::new)
}

/// A new connection to notebook `job`'s JupyterLab for `uid`, through a tunnel; a page that
/// says why not.
async fn connect(
    state: &WebState,
    uid: u32,
    job: u64,
    port: u16,
) -> Result<SendRequest<Body>, Response> {
    let tunnel = state.tunnels.open(uid, job, port).await.map_err(|(status, e)| {
        plain(
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            format!("notebook {job} does not answer yet: {e}\nhint: JupyterLab takes a few seconds to start; reload"),
        )
    })?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tunnel))
        .await
        .map_err(|e| plain(StatusCode::BAD_GATEWAY, format!("notebook {job}: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    Ok(sender)
}

/// The `Cookie` header without the dashboard's session cookie: JupyterLab never sees it.
fn without_dashboard_cookie(value: &HeaderValue) -> Option<HeaderValue> {
    let text = value.to_str().ok()?;
    let kept: Vec<&str> = text
        .split(';')
        .map(str::trim)
        .filter(|c| {
            c.split('=')
                .next()
                .is_some_and(|n| n.trim() != crate::auth::COOKIE)
        })
        .filter(|c| !c.is_empty())
        .collect();
    if kept.is_empty() {
        None
    } else {
        HeaderValue::from_str(&kept.join("; ")).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dashboard_cookie_never_reaches_the_notebook() {
        let v = HeaderValue::from_static("_xsrf=abc; labpool_session=SECRET; username-x=y");
        assert_eq!(
            without_dashboard_cookie(&v).unwrap(),
            "_xsrf=abc; username-x=y"
        );
        assert!(without_dashboard_cookie(&HeaderValue::from_static("labpool_session=S")).is_none());
        assert_eq!(job_of("/notebooks/12/lab/tree"), Some(12));
        assert_eq!(job_of("/notebooks/x/lab"), None);
    }
}
