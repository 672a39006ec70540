//! API handlers for quotas, the scratch purge and the datasets audit. Members see their own
//! quota and may ask for a scan; limits, reports, purges and audits are for admins.

use crate::api::quotas::{
    AuditRequest, LimitRequest, LimitSet, PurgeDone, PurgePlanView, PurgeRequest, QuotaQuery,
    ScanRequest, ScanStatus, UserQuota,
};
use crate::error::ApiError;
use crate::http::{AppState, Peer, body, caller};
use crate::identity::Caller;
use crate::quotas::QuotaService;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use labpool_quotas::audit::AuditReport;

/// The quota routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/quota", get(show))
        .route("/v1/quota/report", get(report))
        .route("/v1/quota/limits", post(set_limit))
        .route("/v1/quota/scan", get(scan_status).post(start_scan))
        .route("/v1/purge/scratch", post(purge))
        .route("/v1/datasets/audit", post(audit))
}

fn admin_only(state: &AppState, c: &Caller, what: &str) -> Result<(), ApiError> {
    crate::http::admin_only(&state.config, c, what)
}

async fn show(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Query(q): Query<QuotaQuery>,
) -> Result<Json<UserQuota>, ApiError> {
    let c = caller(&state, &peer)?;
    let (user, uid) = match q.user {
        Some(u) if u != c.user => {
            admin_only(&state, &c, "see another user's quota")?;
            let found = nix::unistd::User::from_name(&u)
                .ok()
                .flatten()
                .ok_or_else(|| {
                    ApiError::bad_request(format!("no user {u:?} on this machine"), None)
                })?;
            (found.name, found.uid.as_raw())
        }
        _ => (c.user.clone(), c.uid),
    };
    Ok(Json(state.quotas.user_quota(&user, uid).await?))
}

async fn report(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
) -> Result<Json<Vec<UserQuota>>, ApiError> {
    let c = caller(&state, &peer)?;
    admin_only(&state, &c, "see every user's quota")?;
    Ok(Json(state.quotas.report().await?))
}

async fn set_limit(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<LimitRequest>, JsonRejection>,
) -> Result<Json<LimitSet>, ApiError> {
    let c = caller(&state, &peer)?;
    admin_only(&state, &c, "set quotas")?;
    Ok(Json(state.quotas.set_limit(body(req)?, &c.user).await?))
}

async fn start_scan(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<ScanRequest>, JsonRejection>,
) -> Result<Json<ScanStatus>, ApiError> {
    // Anyone may ask: after cleaning up, a member counts again without waiting for an admin.
    caller(&state, &peer)?;
    Ok(Json(state.quotas.start_scan(body(req)?.fs).await?))
}

async fn scan_status(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
) -> Result<Json<ScanStatus>, ApiError> {
    caller(&state, &peer)?;
    Ok(Json(state.quotas.scan_status()))
}

/// Plans (no `execute`), or executes a plan made before.
async fn purge(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<PurgeRequest>, JsonRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let c = caller(&state, &peer)?;
    admin_only(&state, &c, "purge scratch")?;
    let to_json = |v: serde_json::Result<serde_json::Value>| v.map_err(ApiError::internal);
    match body(req)?.execute {
        Some(id) => {
            let done: PurgeDone = state.quotas.execute_purge(&id).await?;
            tracing::info!(by = %c.user, plan = %id, files = done.removed.files, bytes = done.removed.bytes, "scratch purged");
            Ok(Json(to_json(serde_json::to_value(done))?))
        }
        None => {
            let (id, plan) = state.quotas.plan_purge().await?;
            let view: PurgePlanView = QuotaService::view(&id, &plan);
            Ok(Json(to_json(serde_json::to_value(view))?))
        }
    }
}

async fn audit(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<AuditRequest>, JsonRejection>,
) -> Result<Json<AuditReport>, ApiError> {
    let c = caller(&state, &peer)?;
    admin_only(&state, &c, "audit datasets")?;
    Ok(Json(state.quotas.audit(body(req)?.fix).await?))
}
