//! `POST /v1/web/login` on the controller's socket: the one-time URL `labpool web` prints. It
//! is an API endpoint (the caller is the socket's uid), so it lives with the API; the dashboard
//! (`labpool_web`) only takes the tokens it issues.

use crate::api::web::{LoginRequest, LoginUrl};
use crate::error::ApiError;
use crate::http::{AppState, body as body_of, caller};
use crate::socket::Peer;
use axum::Router;
use axum::extract::State;
use axum::extract::connect_info::ConnectInfo;
use axum::routing::post;

/// `POST /v1/web/login` on the controller's socket: a one-time login URL for the caller.
pub fn login_routes() -> Router<AppState> {
    Router::new().route("/v1/web/login", post(issue_login))
}

async fn issue_login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<axum::Json<LoginRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<axum::Json<LoginUrl>, ApiError> {
    let c = caller(&state, &peer)?;
    let req = body_of(body)?;
    let Some(base) = state.logins.base() else {
        return Err(ApiError::not_found(
            "the web dashboard is not being served",
            Some(format!(
                "set listen under [web] in {} (it is \"{}\"), restart the controller, and look in its log for why it could not bind",
                state.config.path.display(),
                state.config.web.listen
            )),
        ));
    };
    let token = state.logins.issue(c.uid);
    let next = match req.next {
        Some(n) if !crate::web::local_path(&n) => {
            return Err(ApiError::bad_request(
                format!("--next {n:?} is not a dashboard page"),
                Some("give a path that starts with /, e.g. /queue or /jobs/12".into()),
            ));
        }
        Some(n) => format!(
            "&next={}",
            url::form_urlencoded::byte_serialize(n.as_bytes()).collect::<String>()
        ),
        None => String::new(),
    };
    Ok(axum::Json(LoginUrl {
        url: format!("{base}/login?token={token}{next}"),
        expires_in_s: state.logins.token_lifetime().as_secs(),
        user: c.user,
    }))
}
