//! The HTTP API on the controller's Unix socket. Each request's caller is the peer's uid from
//! SO_PEERCRED; handlers read the database directly and send changes to the engine.

use crate::api::{
    self, CancelOutcome, CancelRequest, JobView, NodeView, PartitionView, Ping, SubmitRequest,
    Submitted,
};
use crate::api::{AccountChange, AccountsView, CreditsView, GrantRequest, WhyView};
use crate::api::{CreditsQuery, HISTORY_PAGE, HistoryPage, HistoryQuery, JobsQuery};
use crate::clock::now_ms;
use crate::db::Db;
use crate::engine::Request;
use crate::error::ApiError;
use crate::identity::{self, Caller};
use crate::settings::Config;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The engine's inbox.
    pub engine: mpsc::Sender<Request>,
    /// The database, for reads.
    pub db: Db,
    /// The config as read at start.
    pub config: Arc<Config>,
    /// The config with its live sections (partitions, credits, priority, preemption) as last
    /// reloaded (SIGHUP): what answers about those sections read.
    pub live: tokio::sync::watch::Receiver<Arc<Config>>,
    /// The snapshot repository and restores in flight.
    pub snapshots: Arc<crate::snapshots::SnapshotService>,
    /// Quotas, the purge and the audit.
    pub quotas: Arc<crate::quotas::QuotaService>,
    /// Software environments.
    pub envs: Arc<crate::envs::EnvService>,
    /// Set while the state file system is full and the engine takes no work.
    pub storage: crate::storage::StorageGate,
    /// GPU samples, usage summaries and alerts.
    pub monitor: Arc<crate::health::MonitorService>,
    /// The web dashboard's login tokens and sessions.
    pub logins: Arc<crate::web::auth::Logins>,
    /// The way to its jobs' ports.
    pub tunnels: Arc<crate::jobs::forward::Tunnels>,
}

pub use crate::socket::Peer;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self.body)).into_response()
    }
}

impl From<crate::db::DbError> for ApiError {
    fn from(e: crate::db::DbError) -> Self {
        ApiError::internal(e)
    }
}

/// The API routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/ping", get(ping))
        .route("/v1/jobs", get(list_jobs).post(submit))
        .route("/v1/jobs/cancel", post(cancel))
        .route("/v1/jobs/hold", post(hold))
        .route("/v1/jobs/test", post(test_only))
        .route("/v1/jobs/update", post(update))
        .route("/v1/jobs/requeue", post(requeue))
        .route("/v1/jobs/signal", post(signal))
        .route("/v1/jobs/{id}", get(show_job))
        .route("/v1/history", get(history))
        .route("/v1/steps", get(steps_of))
        .route("/v1/jobs/{id}/why", get(why))
        .route("/v1/nodes", get(nodes))
        .route("/v1/nodes/drain", post(drain))
        .route("/v1/partitions", get(partitions))
        .route("/v1/accounts", get(accounts).post(change_accounts))
        .route("/v1/credits", get(credits))
        .route("/v1/credits/grant", post(grant))
        .merge(crate::jobs::sessions::routes())
        .merge(crate::jobs::forward::routes())
        .merge(crate::datasets::http::routes())
        .merge(crate::models::http::routes())
        .merge(crate::snapshots::http::routes())
        .merge(crate::quotas::http::routes())
        .merge(crate::health::http::routes())
        .merge(crate::reports::routes())
        .merge(crate::envs::http::routes())
        .merge(crate::reservations::http::routes())
        .merge(crate::state_backup::routes())
        .merge(crate::web_login::login_routes())
        .fallback(|| async {
            ApiError::not_found(
                "no such API path",
                Some(format!("paths start with {}", api::PREFIX)),
            )
        })
        // A submit carries the script (up to 4 MiB) and the environment.
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// A JSON request body, or a 400 that says what is wrong with it.
pub(crate) fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(t)| t)
        .map_err(|e| ApiError::bad_request(format!("bad request: {}", e.body_text()), None))
}

pub use crate::api::MAX_BODY_BYTES;

pub(crate) fn caller(state: &AppState, peer: &Peer) -> Result<Caller, ApiError> {
    let uid = peer
        .uid
        .ok_or_else(|| ApiError::forbidden("the kernel did not report who is calling", None))?;
    identity::resolve(uid, &state.config.controller.admin_group)
        .map_err(|e| ApiError::forbidden(e.to_string(), None))
}

/// Refuses a caller who is not root or in the admin group, naming the group and what to do.
pub(crate) fn admin_only(config: &Config, c: &Caller, what: &str) -> Result<(), ApiError> {
    if c.admin {
        return Ok(());
    }
    let group = &config.controller.admin_group;
    Err(ApiError::forbidden(
        format!(
            "only admins may {what}; you ({}) are not root or in group {group}",
            c.user
        ),
        Some(format!(
            "ask an admin, or have one add you to the {group} group"
        )),
    ))
}

pub(crate) async fn ask<T>(
    state: &AppState,
    make: impl FnOnce(oneshot::Sender<T>) -> Request,
) -> Result<T, ApiError> {
    let refused = || {
        state
            .storage
            .refused()
            .map_or_else(ApiError::unavailable, ApiError::storage_full)
    };
    if let Some(why) = state.storage.refused() {
        return Err(ApiError::storage_full(why));
    }
    let (tx, rx) = oneshot::channel();
    state.engine.send(make(tx)).await.map_err(|_| refused())?;
    rx.await.map_err(|_| refused())
}

async fn ping(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
) -> Result<Json<Ping>, ApiError> {
    let c = caller(&state, &peer)?;
    Ok(Json(Ping {
        version: crate::api::versions::THIS.to_string(),
        pid: std::process::id(),
        you: c.user,
        admin: c.admin,
    }))
}

async fn submit(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<SubmitRequest>, JsonRejection>,
) -> Result<Json<Submitted>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(mut req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad submit request: {}", e.body_text()), None)
    })?;
    let warnings = match crate::jobs::checks::before_engine(&state, &mut req, &caller).await {
        Ok(w) => w,
        // A retry of a submit that was taken gets its answer, not a refusal: a quota reached
        // since must not make it look refused. Asked only here, on the way to a refusal: on
        // the way in, the engine answers a retry before its own checks.
        Err(refused) => {
            if let Some(key) = &req.idempotency_key
                && let Some(earlier) = state.db.submitted_with_key(caller.uid, key).await?
            {
                return Ok(Json(earlier));
            }
            return Err(refused);
        }
    };
    let mut submitted = ask(&state, |reply| Request::Submit {
        req: Box::new(req),
        caller,
        reply,
    })
    .await??;
    submitted.warnings.splice(0..0, warnings);
    Ok(Json(submitted))
}

/// The jobs a request names (`{"ids": [...]}`), asked of the engine as `make` builds it.
async fn for_ids(
    state: &AppState,
    peer: &Peer,
    body: Result<Json<CancelRequest>, JsonRejection>,
    what: &str,
    make: impl FnOnce(Vec<String>, Caller, tokio::sync::oneshot::Sender<Vec<CancelOutcome>>) -> Request,
) -> Result<Json<Vec<CancelOutcome>>, ApiError> {
    let caller = caller(state, peer)?;
    let Json(req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad {what} request: {}", e.body_text()), None)
    })?;
    Ok(Json(
        ask(state, |reply| make(req.ids, caller, reply)).await?,
    ))
}

async fn cancel(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<CancelRequest>, JsonRejection>,
) -> Result<Json<Vec<CancelOutcome>>, ApiError> {
    for_ids(&state, &peer, body, "cancel", |ids, caller, reply| {
        Request::Cancel { ids, caller, reply }
    })
    .await
}

/// `POST /v1/jobs/requeue`: stop running jobs and queue them again.
async fn requeue(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<CancelRequest>, JsonRejection>,
) -> Result<Json<Vec<CancelOutcome>>, ApiError> {
    for_ids(&state, &peer, body, "requeue", |ids, caller, reply| {
        Request::Requeue { ids, caller, reply }
    })
    .await
}

/// `POST /v1/jobs/signal`: a signal to running jobs, which go on running.
async fn signal(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<api::SignalRequest>, JsonRejection>,
) -> Result<Json<Vec<CancelOutcome>>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad signal request: {}", e.body_text()), None)
    })?;
    Ok(Json(
        ask(&state, |reply| Request::Signal { req, caller, reply }).await?,
    ))
}

/// `POST /v1/jobs/update`: new values for a waiting job.
async fn update(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<api::UpdateRequest>, JsonRejection>,
) -> Result<Json<String>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad update request: {}", e.body_text()), None)
    })?;
    let out = ask(&state, |reply| Request::Update { req, caller, reply }).await??;
    Ok(Json(out))
}

/// `POST /v1/jobs/test`: a submit's checks and its predicted start; nothing is queued.
async fn test_only(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<SubmitRequest>, JsonRejection>,
) -> Result<Json<api::test_only::WouldStart>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(mut req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad submit request: {}", e.body_text()), None)
    })?;
    crate::jobs::checks::before_engine(&state, &mut req, &caller).await?;
    let would = ask(&state, |reply| Request::TestOnly {
        req: Box::new(req),
        caller,
        reply,
    })
    .await??;
    Ok(Json(would))
}

async fn hold(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<api::HoldRequest>, JsonRejection>,
) -> Result<Json<Vec<CancelOutcome>>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(req) = body
        .map_err(|e| ApiError::bad_request(format!("bad hold request: {}", e.body_text()), None))?;
    Ok(Json(
        ask(&state, |reply| Request::Hold {
            ids: req.ids,
            hold: req.hold,
            caller,
            reply,
        })
        .await?,
    ))
}

async fn list_jobs(
    State(state): State<AppState>,
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<Json<Vec<JobView>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let now = now_ms();
    let rows = state.db.active_jobs(q.user.as_deref()).await?;
    Ok(Json(rows.iter().map(|r| r.view(now)).collect()))
}

pub use crate::api::JobDetail;

async fn show_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobDetail>, ApiError> {
    let id = crate::jobs::job_id(&id)?;
    let row = state.db.job(id).await?.ok_or_else(|| {
        ApiError::not_found(
            format!("no job {id}"),
            Some("`labpool queue` and `labpool history` list jobs".to_string()),
        )
    })?;
    let events = state.db.events(id).await?;
    let steps = state.db.steps(id).await?;
    let mut job = row.view(now_ms());
    job.gpu_usage = state
        .db
        .gpu_usage(id, row.attempt)
        .await?
        .filter(|u| u.samples > 0)
        .map(|u| (&u).into());
    let peak = job.gpu_usage.as_ref().map(|u| u.mem_peak_mib);
    let advice = advise(&state, &row, peak).await?;
    Ok(Json(JobDetail {
        job,
        events,
        steps,
        advice,
    }))
}

async fn history(
    State(state): State<AppState>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<HistoryPage>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let limit = q.limit.unwrap_or(HISTORY_PAGE);
    if limit == 0 || limit > HISTORY_PAGE {
        return Err(ApiError::bad_request(
            format!("limit={limit}: a page holds 1 to {HISTORY_PAGE} jobs"),
            Some("ask for the next page with after= and the page's `next`".to_string()),
        ));
    }
    let after = match q.after.as_deref().map(parse_cursor) {
        None => None,
        Some(Some(c)) => Some(c),
        Some(None) => {
            return Err(ApiError::bad_request(
                format!(
                    "after={:?} is not a page's `next`",
                    q.after.unwrap_or_default()
                ),
                None,
            ));
        }
    };
    let ids = match q.ids.as_deref().map(parse_ids).transpose() {
        Ok(ids) => ids,
        Err(why) => return Err(ApiError::bad_request(why, None)),
    };
    let rows = state
        .db
        .finished_jobs(q.user.as_deref(), q.since_ms, after, ids.as_deref(), limit)
        .await?;
    let now = now_ms();
    let next = (rows.len() == limit as usize)
        .then(|| {
            rows.last()
                .map(|r| format!("{}.{}", r.end_time.unwrap_or(0), r.id))
        })
        .flatten();
    let ids: Vec<u64> = rows.iter().map(|r| r.id).collect();
    let usage = state.db.gpu_usage_of(&ids).await?;
    let jobs = rows
        .iter()
        .map(|r| {
            let mut v = r.view(now);
            v.gpu_usage = usage.get(&r.id).filter(|u| u.samples > 0).map(Into::into);
            v
        })
        .collect();
    Ok(Json(HistoryPage { jobs, next }))
}

/// `GET /v1/steps?ids=…`: each named job's steps, by job id (a job with none is left out).
async fn steps_of(
    State(state): State<AppState>,
    query: Result<Query<crate::api::StepsQuery>, QueryRejection>,
) -> Result<Json<std::collections::BTreeMap<u64, Vec<crate::jobs::steps::StepView>>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let ids = parse_ids(&q.ids).map_err(|why| ApiError::bad_request(why, None))?;
    Ok(Json(state.db.steps_of(&ids).await?))
}

/// `ids=12,13,14`: job ids, at most [`crate::api::HISTORY_IDS`], every bad one named.
fn parse_ids(text: &str) -> Result<Vec<u64>, String> {
    let words: Vec<&str> = text.split(',').map(str::trim).collect();
    if words.len() > crate::api::HISTORY_IDS {
        return Err(format!(
            "ids= names {} jobs; ask for at most {} at once",
            words.len(),
            crate::api::HISTORY_IDS
        ));
    }
    let bad: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| w.parse::<u64>().is_err())
        .collect();
    if !bad.is_empty() {
        return Err(format!("ids=: {} are not job ids", bad.join(", ")));
    }
    Ok(words.iter().filter_map(|w| w.parse().ok()).collect())
}

/// A page's `next` (`END_MS.ID`) as the row it follows.
fn parse_cursor(text: &str) -> Option<(i64, u64)> {
    let (end, id) = text.split_once('.')?;
    Some((end.parse().ok()?, id.parse().ok()?))
}

/// The nodes, with each GPU's latest utilisation and temperature from the monitor.
async fn nodes(State(state): State<AppState>) -> Result<Json<Vec<NodeView>>, ApiError> {
    let mut nodes = ask(&state, |reply| Request::Nodes { reply }).await?;
    state.monitor.fill_readings(&mut nodes);
    Ok(Json(nodes))
}

async fn partitions(State(state): State<AppState>) -> Json<Vec<PartitionView>> {
    let config = state.live.borrow().clone();
    Json(
        config
            .scheduler_partitions()
            .into_iter()
            .map(|p| PartitionView {
                name: p.name,
                default: p.default,
                priority: p.priority,
                default_time_s: api::limit_secs(p.default_time),
                max_time_s: api::limit_secs(p.max_time),
                nodes: p.nodes.unwrap_or_default(),
                allow_accounts: p.allow_accounts,
                max_gpus_per_job: p.max_gpus_per_job,
                default_slice: p.default_slice,
            })
            .collect(),
    )
}

async fn why(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<WhyView>, ApiError> {
    let id = crate::jobs::job_id(&id)?;
    let mut view = ask(&state, |reply| Request::Why { id, reply }).await??;
    if let Some(row) = state.db.job(id).await? {
        view.advice = advise(&state, &row, None).await?;
    }
    Ok(Json(view))
}

/// The slice advice for a job (see [`crate::jobs::advice`]).
async fn advise(
    state: &AppState,
    row: &crate::jobs::JobRow,
    own_peak: Option<u64>,
) -> Result<Option<String>, ApiError> {
    if row.spec.resources.gpus != 1 {
        return Ok(None);
    }
    let nodes = ask(state, |reply| Request::Nodes { reply }).await?;
    Ok(crate::jobs::advice::slice_advice(&state.db, &nodes, row, own_peak, now_ms()).await?)
}

async fn accounts(State(state): State<AppState>) -> Result<Json<AccountsView>, ApiError> {
    Ok(Json(
        ask(&state, |reply| Request::Accounts { reply }).await?,
    ))
}

async fn change_accounts(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<AccountChange>, JsonRejection>,
) -> Result<Json<String>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(change) = body.map_err(|e| {
        ApiError::bad_request(format!("bad account change: {}", e.body_text()), None)
    })?;
    Ok(Json(
        ask(&state, |reply| Request::Account {
            change,
            caller,
            reply,
        })
        .await??,
    ))
}

async fn credits(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    query: Result<Query<CreditsQuery>, QueryRejection>,
) -> Result<Json<CreditsView>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    // A member's ledger names their jobs and what they cost, like Slurm's accounting under
    // PrivateData=usage: members see their own, admins anyone's.
    if let Some(other) = q.user.as_deref().filter(|u| *u != caller.user) {
        admin_only(
            &state.config,
            &caller,
            &format!("see another user's credits ({other})"),
        )?;
    }
    let user = q.user.unwrap_or(caller.user);
    Ok(Json(
        ask(&state, |reply| Request::Credits { user, reply }).await?,
    ))
}

async fn drain(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<crate::api::DrainRequest>, JsonRejection>,
) -> Result<Json<NodeView>, ApiError> {
    let caller = caller(&state, &peer)?;
    let req = body(req)?;
    Ok(Json(
        ask(&state, |reply| Request::Drain {
            node: req.node,
            reason: req.reason,
            caller,
            reply,
        })
        .await??,
    ))
}

async fn grant(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<GrantRequest>, JsonRejection>,
) -> Result<Json<CreditsView>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(req) =
        body.map_err(|e| ApiError::bad_request(format!("bad grant: {}", e.body_text()), None))?;
    Ok(Json(
        ask(&state, |reply| Request::Grant { req, caller, reply }).await??,
    ))
}
