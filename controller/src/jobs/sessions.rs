//! `GET /v1/jobs/{id}/session`: where a running session's host answers and the token it asks
//! for, so that `labpool attach` (and `sattach`) join it again from any machine of the pool.
//! Only the job's owner and admins get it: the token opens the owner's shell. And the host's
//! reports, which feed the idle rule.

use super::{job_id, owned_job};
use crate::api::sessions::{
    NOTEBOOK_TOKEN_VAR, NotebookView, SessionReply, SessionReport, SessionView, TOKEN_VAR,
    notebook_base, notebook_port,
};
use crate::error::ApiError;
use crate::http::{AppState, Peer, caller};
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use labpool_scheduler::JobState;

/// The session routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs/{id}/session", get(session))
        .route("/v1/jobs/{id}/session/report", post(report))
        .route("/v1/jobs/{id}/notebook", get(notebook))
}

/// `GET /v1/jobs/{id}/notebook`: a running notebook's port and token, for the dashboard's proxy
/// acting for the job's owner (or an admin).
async fn notebook(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(id): Path<String>,
) -> Result<Json<NotebookView>, ApiError> {
    let caller = caller(&state, &peer)?;
    let id = job_id(&id)?;
    let row = owned_job(
        &state,
        &caller,
        id,
        "may open only your own notebooks",
        Some("`labpool queue` lists your running notebooks"),
    )
    .await?;
    let token = row.request.environment.get(NOTEBOOK_TOKEN_VAR);
    let (Some(_), Some(token)) = (
        crate::api::session_script::notebook_of_script(&row.request.script),
        token,
    ) else {
        return Err(ApiError::bad_request(
            format!("job {id} is not a notebook: `labpool notebook` starts one"),
            None,
        ));
    };
    let port = row.ports.and_then(|p| notebook_port(p.first));
    let (JobState::Running, Some(port)) = (row.state, port) else {
        return Err(ApiError::conflict(
            format!("notebook {id} is {}: it is not running", row.state),
            Some(match row.state {
                JobState::Pending | JobState::Staging => {
                    format!("it opens once it runs: `labpool why {id}` says why it waits")
                }
                _ => format!(
                    "`labpool show {id}` says how it ended; `labpool notebook` starts another"
                ),
            }),
        ));
    };
    Ok(Json(NotebookView {
        job_id: id,
        port,
        token: token.clone(),
        base_url: notebook_base(id),
    }))
}

/// `POST /v1/jobs/{id}/session/report`: the session's host says whether its member typed; the
/// answer carries the words its terminal should show (see `crate::health::idle`). Only the
/// job's owner (its host runs as them) and admins may report.
async fn report(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(id): Path<String>,
    body: Result<Json<SessionReport>, JsonRejection>,
) -> Result<Json<SessionReply>, ApiError> {
    let caller = caller(&state, &peer)?;
    let report = crate::http::body(body)?;
    let id = job_id(&id)?;
    let row = owned_job(
        &state,
        &caller,
        id,
        "may report only for your own sessions",
        None,
    )
    .await?;
    if !row.request.interactive || row.state != JobState::Running {
        return Err(ApiError::conflict(
            format!("job {id} is not a running session"),
            None,
        ));
    }
    Ok(Json(SessionReply {
        notice: state.monitor.session_report(id, report.input),
    }))
}

async fn session(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let caller = caller(&state, &peer)?;
    let id = job_id(&id)?;
    let row = owned_job(
        &state,
        &caller,
        id,
        "may attach only to your own sessions",
        Some("`labpool queue` lists your running sessions"),
    )
    .await?;
    let script = crate::api::session_script::session_of_script(&row.request.script);
    let (Some(script), Some(token)) = (script, row.request.environment.get(TOKEN_VAR)) else {
        return Err(ApiError::bad_request(
            format!(
                "job {id} is not an interactive session: only `labpool run --pty`, `srun --pty` and `salloc` start one"
            ),
            Some(format!(
                "`labpool logs {id}` shows a batch job's output as it runs"
            )),
        ));
    };
    if row.state != JobState::Running {
        return Err(ApiError::conflict(
            format!(
                "session {id} is {}: there is nothing to attach to",
                row.state
            ),
            Some(match row.state {
                JobState::Pending | JobState::Staging => {
                    format!("wait until it runs: `labpool why {id}` says why it waits")
                }
                _ => format!("`labpool show {id}` says how it ended"),
            }),
        ));
    }
    Ok(Json(SessionView {
        job_id: id,
        uid: row.uid,
        node: row.node.clone(),
        socket: script.socket,
        token: token.clone(),
    }))
}
