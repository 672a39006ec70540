//! `GET /v1/alerts` (for `labpool alerts`) and the `/metrics` listener. Admins see every alert;
//! a member sees the pool's own alerts and those about them, not other members' zombies.

use crate::api::alerts::AlertsView;
use crate::error::ApiError;
use crate::http::{AppState, Peer, caller};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::extract::connect_info::ConnectInfo;
use axum::routing::get;

/// The monitor's API routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/alerts", get(list))
        .route("/v1/doctor", get(super::doctor::doctor))
}

async fn list(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
) -> Result<Json<AlertsView>, ApiError> {
    let c = caller(&state, &peer)?;
    let admin = c.admin;
    let (firing, pending, resolved) = state.monitor.alerts();
    let mine =
        |a: &labpool_monitor::alerts::Alert| admin || a.user.as_deref().is_none_or(|u| u == c.user);
    Ok(Json(AlertsView {
        firing: firing.into_iter().filter(mine).collect(),
        pending: pending.into_iter().filter(mine).collect(),
        resolved: resolved.into_iter().filter(mine).collect(),
    }))
}
