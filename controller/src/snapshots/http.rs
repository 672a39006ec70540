//! API handlers for snapshots. A member sees and restores only what they owned in a snapshot;
//! root and the admin group see everything. Repository work runs on blocking threads.

use crate::api::snapshots::{
    Change, DiffRequest, Entry, FindReport, FindRequest, ListQuery, LsRequest, RestoreRequest,
    RestoreStarted, RestoreStatus, SnapshotView,
};
use crate::error::ApiError;
use crate::http::{AppState, Peer, caller};
use crate::identity::Caller;
use axum::Json;
use axum::Router;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use chrono::{Local, Offset, Utc};
use labpool_snapshots::select::{At, pick};
use labpool_snapshots::{Progress, Repository, RestoreOptions, SnapshotError, browse, restore};
use std::path::{Component, PathBuf};

/// The snapshot routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/snapshots", get(list))
        .route("/v1/snapshots/ls", post(ls))
        .route("/v1/snapshots/find", post(find))
        .route("/v1/snapshots/diff", post(diff))
        .route("/v1/snapshots/restore", post(start_restore))
        .route("/v1/snapshots/restores/{id}", get(restore_status))
}

fn bad(e: SnapshotError) -> ApiError {
    match e {
        SnapshotError::NotYours { .. } => ApiError::forbidden(e.to_string(), None),
        e => ApiError::bad_request(e.to_string(), None),
    }
}

/// Whose entries the caller may see: `None` for admins, their uid for members.
fn only_uid(c: &Caller) -> Option<u32> {
    (!c.admin).then_some(c.uid)
}

fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(t)| t).map_err(|e| {
        ApiError::bad_request(format!("bad snapshot request: {}", e.body_text()), None)
    })
}

/// An absolute path with no `..`: anything else could name a place other than the one shown.
fn clean_path(p: &std::path::Path) -> Result<PathBuf, ApiError> {
    if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(ApiError::bad_request(
            format!("{} must be an absolute path without `..`", p.display()),
            None,
        ));
    }
    Ok(p.components().collect())
}

/// Runs `f` on the repository, under its read lock, on a blocking thread; no repository yet
/// is an error that says when the first snapshot will be taken.
async fn with_repo<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&Repository) -> Result<T, SnapshotError> + Send + 'static,
) -> Result<T, ApiError> {
    let svc = state.snapshots.clone();
    let repo_path = state.config.snapshot_repo();
    tokio::task::spawn_blocking(move || {
        svc.read(f).map_err(bad)?.ok_or_else(|| {
            ApiError::not_found(
                format!("no snapshots yet: there is no repository at {}", repo_path.display()),
                Some("the first scheduled backup creates it; an admin can run `labpool snapshot create` now".into()),
            )
        })
    })
    .await
    .map_err(ApiError::internal)?
}

async fn list(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<SnapshotView>>, ApiError> {
    caller(&state, &peer)?;
    // No repository yet is an empty list, not an error: nothing has been backed up.
    let svc = state.snapshots.clone();
    let all = tokio::task::spawn_blocking(move || svc.read(|r| r.snapshots()))
        .await
        .map_err(ApiError::internal)?
        .map_err(bad)?
        .unwrap_or_default();
    Ok(Json(
        all.iter()
            .filter(|s| q.source.as_ref().is_none_or(|n| &s.source == n))
            .map(SnapshotView::from)
            .collect(),
    ))
}

async fn ls(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<LsRequest>, JsonRejection>,
) -> Result<Json<Vec<Entry>>, ApiError> {
    let who = only_uid(&caller(&state, &peer)?);
    let req = body(req)?;
    let path = req.path.as_deref().map(clean_path).transpose()?;
    with_repo(&state, move |r| {
        let s = r.select(&req.snapshot)?;
        let p = path.unwrap_or_else(|| s.path.clone());
        browse::ls(r, &s, &p, req.recursive, who)
    })
    .await
    .map(Json)
}

async fn find(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<FindRequest>, JsonRejection>,
) -> Result<Json<FindReport>, ApiError> {
    let who = only_uid(&caller(&state, &peer)?);
    let path = clean_path(&body(req)?.path)?;
    with_repo(&state, move |r| browse::find(r, &path, who))
        .await
        .map(Json)
}

async fn diff(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<DiffRequest>, JsonRejection>,
) -> Result<Json<Vec<Change>>, ApiError> {
    let who = only_uid(&caller(&state, &peer)?);
    let req = body(req)?;
    with_repo(&state, move |r| {
        let a = r.select(&req.a)?;
        let b = r.select(&req.b)?;
        browse::diff(r, &a, &b, who)
    })
    .await
    .map(Json)
}

async fn start_restore(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<RestoreRequest>, JsonRejection>,
) -> Result<Json<RestoreStarted>, ApiError> {
    let who_is = caller(&state, &peer)?;
    let who = only_uid(&who_is);
    let req = body(req)?;
    let path = clean_path(&req.path)?;
    let target = req.target.as_deref().map(clean_path).transpose()?;
    let tz = Local::now().offset().fix();
    let at = At::parse(req.at.as_deref().unwrap_or("latest"), Utc::now(), tz).map_err(bad)?;
    let opts = RestoreOptions {
        overwrite: req.overwrite,
        only_uid: who,
        set_owner: nix::unistd::geteuid().is_root(),
        member_groups: who.map(|_| crate::identity::groups_of(&who_is.user, who_is.gid)),
    };
    // Choosing the snapshot happens before the reply, so that the caller hears "not in any
    // snapshot" at once; the destination is checked by the restore itself, on open
    // descriptors (a path check here, as root, would tell a member what exists where).
    let original = path.clone();
    let (snap, node) = with_repo(&state, move |r| pick(r, &path, &at, who)).await?;
    let total = with_repo(&state, {
        let node = node.clone();
        move |r| restore::total_bytes(r, &node, who)
    })
    .await?;
    // Registered only once it will run, so a refused request leaves nothing behind.
    let (id, task) = state.snapshots.start_restore(who_is.uid);
    let started = RestoreStarted {
        id,
        snapshot: SnapshotView::from(&snap),
        total_bytes: total,
    };
    let svc = state.snapshots.clone();
    tokio::task::spawn_blocking(move || {
        let outcome = svc.read(|r| {
            restore::restore_to(
                r,
                &snap,
                &node,
                &original,
                target.as_deref(),
                &opts,
                &task.progress,
            )
        });
        *task.outcome.lock().unwrap() = Some(match outcome {
            Ok(Some(report)) => Ok(report),
            Ok(None) => Err("the repository disappeared".to_string()),
            Err(e) => Err(e.to_string()),
        });
    });
    Ok(Json(started))
}

async fn restore_status(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(id): Path<u64>,
) -> Result<Json<RestoreStatus>, ApiError> {
    let who = caller(&state, &peer)?;
    // Someone else's restore is answered like one that does not exist.
    let task = state
        .snapshots
        .restore(id)
        .filter(|t| who.admin || t.uid == who.uid)
        .ok_or_else(|| ApiError::not_found(format!("no restore {id} of yours"), None))?;
    let outcome = task.outcome.lock().unwrap().clone();
    let (report, error) = match outcome {
        Some(Ok(r)) => (Some(r), None),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    Ok(Json(RestoreStatus {
        bytes: Progress::get(&task.progress.bytes),
        total_bytes: Progress::get(&task.progress.total_bytes),
        entries: Progress::get(&task.progress.entries),
        report,
        error,
    }))
}
