//! API handlers for datasets and node caches. Registration and rescans walk the source here,
//! on a blocking thread, so the engine never waits on a file server.

use crate::api::data::CacheQuery;
use crate::api::data::{
    AddDatasetRequest, CacheStatus, DatasetDetail, DatasetView, RescanOutcome, StageQueued,
    StageRequest, VerifiedVersion, VerifyRequest,
};
use crate::clock::now_ms;
use crate::datasets::db::DatasetRow;
use crate::datasets::errors::admin_only;
use crate::datasets::registry::{
    already_registered, dataset_view, registered_hint, version_row, version_view,
};
use crate::engine::Request;
use crate::error::ApiError;
use crate::http::{AppState, Peer, ask, caller};
use axum::Json;
use axum::Router;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use labpool_cache::CacheError;
use labpool_cache::manifest::{Manifest, rescan, scan};
use labpool_cache::registry::{check_name, check_source, make_read_only};

/// The dataset and cache routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/datasets", get(list).post(add))
        .route("/v1/datasets/{name}", get(show))
        .route("/v1/datasets/{name}/rescan", post(rescan_dataset))
        .route("/v1/cache", get(cache_status))
        .route("/v1/cache/stage", post(stage))
        .route("/v1/cache/verify", post(verify))
}

/// Cache errors say what to do themselves.
pub(crate) fn bad(e: CacheError) -> ApiError {
    ApiError::bad_request(e.to_string(), None)
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CacheError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)?
        .map_err(bad)
}

async fn add(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<AddDatasetRequest>, JsonRejection>,
) -> Result<Json<DatasetView>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad dataset request: {}", e.body_text()), None)
    })?;
    if !caller.admin {
        return Err(admin_only("dataset add"));
    }
    check_name(&req.name).map_err(bad)?;
    if req.name.starts_with(crate::models::DATASET_PREFIX) {
        return Err(ApiError::bad_request(
            format!(
                "dataset names starting with {:?} are the model cache's",
                crate::models::DATASET_PREFIX
            ),
            Some("choose another name; models are added with `labpool model add`".to_string()),
        ));
    }
    let root = state.config.datasets.root.clone();
    let requested = req.path.clone();
    let path = blocking(move || check_source(&root, &requested)).await?;
    Ok(Json(
        register(&state, req.name, path, req.description, caller).await?,
    ))
}

/// Registers the directory `path` (checked by the caller) as dataset `name`: made read-only,
/// scanned, its manifest saved, and recorded by the engine. The API handler decides who may.
pub(crate) async fn register(
    state: &AppState,
    name: String,
    path: std::path::PathBuf,
    description: String,
    caller: crate::identity::Caller,
) -> Result<DatasetView, ApiError> {
    if let Some(old) = state
        .db
        .datasets()
        .await?
        .into_iter()
        .find(|d| d.name == name)
    {
        return Err(already_registered(&old));
    }
    let threads = state.config.datasets.scan_threads;
    let source = path.clone();
    let manifest = blocking(move || {
        make_read_only(&source)?;
        scan(&source, threads, &|_| {})
    })
    .await?;
    save(state, &name, &manifest).await?;
    let dataset = DatasetRow {
        name,
        path,
        description,
        created: now_ms(),
        created_by: caller.user.clone(),
        current: manifest.version(),
    };
    ask(state, |reply| Request::AddDataset {
        dataset,
        manifest: Box::new(manifest),
        caller,
        reply,
    })
    .await?
}

/// Saves a version's manifest where the controller and the stagers read it.
async fn save(state: &AppState, name: &str, manifest: &Manifest) -> Result<(), ApiError> {
    let path = state
        .config
        .manifests_dir()
        .join(name)
        .join(format!("{}.json", manifest.version()));
    let m = manifest.clone();
    tokio::task::spawn_blocking(move || m.save(&path))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)
}

async fn list(State(state): State<AppState>) -> Result<Json<Vec<DatasetView>>, ApiError> {
    let mut out = Vec::new();
    for d in state.db.datasets().await? {
        let versions = state.db.dataset_versions(&d.name).await?;
        out.push(dataset_view(&d, &versions));
    }
    Ok(Json(out))
}

async fn find(state: &AppState, name: &str) -> Result<DatasetRow, ApiError> {
    let all = state.db.datasets().await?;
    let hint = registered_hint(all.iter().map(|d| d.name.as_str()));
    all.into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| ApiError::not_found(format!("no dataset {name:?}"), Some(hint)))
}

async fn show(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<DatasetDetail>, ApiError> {
    let d = find(&state, &name).await?;
    let versions = state.db.dataset_versions(&name).await?;
    Ok(Json(DatasetDetail {
        dataset: dataset_view(&d, &versions),
        history: versions
            .iter()
            .map(|v| version_view(v, &d.current))
            .collect(),
    }))
}

async fn rescan_dataset(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(name): Path<String>,
) -> Result<Json<RescanOutcome>, ApiError> {
    let caller = caller(&state, &peer)?;
    if !caller.admin {
        return Err(admin_only("dataset rescan"));
    }
    let d = find(&state, &name).await?;
    // The source must still be a directory under the root; a symlink swapped in since
    // registration is refused like at registration.
    let (root, source) = (state.config.datasets.root.clone(), d.path.clone());
    blocking(move || check_source(&root, &source)).await?;
    Ok(Json(record_rescan(&state, d, caller).await?))
}

/// Rescans dataset `d`'s source (checked by the caller) and records a new version when it
/// changed. The API handler decides who may.
pub(crate) async fn record_rescan(
    state: &AppState,
    d: DatasetRow,
    caller: crate::identity::Caller,
) -> Result<RescanOutcome, ApiError> {
    let name = d.name.clone();
    let old_path = state
        .config
        .manifests_dir()
        .join(&name)
        .join(format!("{}.json", d.current));
    let threads = state.config.datasets.scan_threads;
    let source = d.path.clone();
    let (manifest, diff) = blocking(move || {
        let previous = Manifest::load(&old_path)?;
        make_read_only(&source)?;
        rescan(&source, &previous, threads)
    })
    .await?;
    let changed_bytes = diff.changed_bytes(&manifest);
    let counts = (
        diff.added.len() as u64,
        diff.removed.len() as u64,
        diff.changed.len() as u64,
    );
    if manifest.version() == d.current {
        let versions = state.db.dataset_versions(&name).await?;
        return Ok(RescanOutcome {
            dataset: dataset_view(&d, &versions),
            new_version: false,
            added: counts.0,
            removed: counts.1,
            changed: counts.2,
            changed_bytes,
        });
    }
    save(state, &name, &manifest).await?;
    let version = version_row(&manifest, now_ms(), (counts.0 + counts.2, changed_bytes));
    let view = ask(state, |reply| Request::AddVersion {
        name,
        version,
        manifest: Box::new(manifest),
        caller,
        reply,
    })
    .await??;
    Ok(RescanOutcome {
        dataset: view,
        new_version: true,
        added: counts.0,
        removed: counts.1,
        changed: counts.2,
        changed_bytes,
    })
}

async fn cache_status(
    State(state): State<AppState>,
    query: Result<Query<CacheQuery>, QueryRejection>,
) -> Result<Json<Vec<CacheStatus>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    Ok(Json(
        ask(&state, |reply| Request::CacheStatus {
            node: q.node,
            reply,
        })
        .await??,
    ))
}

async fn stage(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<StageRequest>, JsonRejection>,
) -> Result<Json<StageQueued>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad stage request: {}", e.body_text()), None)
    })?;
    Ok(Json(
        ask(&state, |reply| Request::CacheStage { req, caller, reply }).await??,
    ))
}

async fn verify(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<VerifyRequest>, JsonRejection>,
) -> Result<Json<Vec<VerifiedVersion>>, ApiError> {
    let caller = caller(&state, &peer)?;
    let Json(req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad verify request: {}", e.body_text()), None)
    })?;
    Ok(Json(
        ask(&state, |reply| Request::CacheVerify {
            node: req.node,
            caller,
            reply,
        })
        .await??,
    ))
}
