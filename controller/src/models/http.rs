//! API handlers of the model cache: add a revision, list models.

use crate::api::data::DatasetView;
use crate::api::models::{AddModelRequest, ModelAdded, ModelView};
use crate::datasets::http::{record_rescan, register};
use crate::datasets::registry::dataset_view;
use crate::error::ApiError;
use crate::http::{AppState, Peer, body, caller};
use crate::models::names;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::JsonRejection;
use axum::routing::get;
use labpool_cache::hub::refs::read_refs;
use labpool_cache::hub::{RepoId, parse_spec};
use std::path::Path;

/// The model routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/models", get(list).post(add))
}

async fn add(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<AddModelRequest>, JsonRejection>,
) -> Result<Json<ModelAdded>, ApiError> {
    let caller = caller(&state, &peer)?;
    let req = body(req)?;
    let (repo, revision) =
        parse_spec(&req.spec).map_err(|e| ApiError::bad_request(e.to_string(), None))?;
    if req.shared && !caller.admin {
        return Err(ApiError::forbidden(
            format!("only an admin adds models to the lab's shared namespace ({repo})"),
            Some(format!(
                "leave out --shared to add it to your own: `labpool model add {} --from DIR`",
                req.spec
            )),
        ));
    }
    if !req.from.is_absolute() {
        return Err(ApiError::bad_request(
            format!("--from {} is not an absolute path", req.from.display()),
            Some("give the directory's full path".to_string()),
        ));
    }
    let owner = if req.shared {
        String::new()
    } else {
        caller.user.clone()
    };
    let store = state.config.datasets.models_store();
    let dataset = names::dataset_name(&owner, &repo);
    // One add of a model at a time, from the copy to its version's record.
    let _lock = lock(&store, &dataset).await?;
    let existing = state
        .db
        .datasets()
        .await?
        .into_iter()
        .find(|d| d.name == dataset);
    // A model keeps the tree it was first added to, wherever [datasets] models points now.
    let root = existing
        .as_ref()
        .map_or_else(|| names::root(&store, &owner, &repo), |d| d.path.clone());
    let tmp = store.join(".tmp");
    let imported =
        super::copy::copy(&caller, &req.from, &repo, &revision, root.clone(), tmp).await?;
    let view = match existing {
        Some(d) => record_rescan(&state, d, caller).await?.dataset,
        None => {
            let whose = if owner.is_empty() {
                "shared".to_string()
            } else {
                format!("{owner}'s")
            };
            let description = format!("model {repo} ({whose})");
            register(&state, dataset, root.clone(), description, caller).await?
        }
    };
    Ok(Json(ModelAdded {
        model: model_view(&view, &owner, &repo),
        revision,
        commit: imported.commit,
        files: imported.files,
        bytes: imported.bytes,
        new_bytes: imported.new_bytes,
    }))
}

/// The caller's models and the lab's; an admin's list has every member's too.
async fn list(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
) -> Result<Json<Vec<ModelView>>, ApiError> {
    let caller = caller(&state, &peer)?;
    let store = state.config.datasets.models_store();
    let mut out = Vec::new();
    for d in state.db.datasets().await? {
        if !d.name.starts_with(names::DATASET_PREFIX) {
            continue;
        }
        let Some((owner, repo)) = names::from_root(&store, &d.path) else {
            continue;
        };
        if !(caller.admin || owner.is_empty() || owner == caller.user) {
            continue;
        }
        let versions = state.db.dataset_versions(&d.name).await?;
        out.push(model_view(&dataset_view(&d, &versions), &owner, &repo));
    }
    out.sort_by(|a, b| (&a.repo, &a.owner).cmp(&(&b.repo, &b.owner)));
    Ok(Json(out))
}

/// Holds the lock of `dataset`'s adds (`STORE/.locks/DATASET.lock`) until dropped.
async fn lock(store: &Path, dataset: &str) -> Result<std::fs::File, ApiError> {
    let dir = store.join(".locks");
    let path = dir.join(format!("{dataset}.lock"));
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e| ApiError::internal(format!("cannot take the model's lock: {e}")))
}

/// The API view of a model, from its dataset's.
fn model_view(d: &DatasetView, owner: &str, repo: &RepoId) -> ModelView {
    ModelView {
        repo: repo.as_string(),
        owner: owner.to_string(),
        dataset: d.name.clone(),
        version: d.current.clone(),
        files: d.files,
        bytes: d.bytes,
        refs: read_refs(&d.path.join(repo.folder()).join("refs")).unwrap_or_default(),
        path: d.path.clone(),
    }
}
