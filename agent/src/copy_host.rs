//! The snapshot copy a node keeps for the controller (`[agent] snapshot_copy`): the controller
//! lists, writes and reads its files over the signed transport; the node writes only
//! repository files (`config.json`, `packs/…`, `snapshots/…`), only in that directory.

use crate::api::agent::CopyKey;
use crate::transport::{Signed, error_response};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use labpool_snapshots::copy::{DirStore, Store, part_of};
use std::path::PathBuf;

/// The copy directory, when the node keeps one.
#[derive(Clone)]
pub struct CopyHost(pub Option<PathBuf>);

/// Runs `f` on the copy directory (and `key`, checked to be a repository file) off the async
/// threads, and answers with what it returned.
async fn on_copy<T: IntoResponse + Send + 'static>(
    host: CopyHost,
    signed: &Signed,
    key: Option<CopyKey>,
    f: impl FnOnce(DirStore, String) -> labpool_snapshots::Result<T> + Send + 'static,
) -> Response {
    // Only the controller itself writes the copy, never a member's request an agent forwards.
    if signed.uid.is_some() {
        return error_response(
            StatusCode::FORBIDDEN,
            "the snapshot copy takes only the controller's own requests".into(),
            None,
        );
    }
    let Some(dir) = host.0 else {
        return error_response(
            StatusCode::FORBIDDEN,
            "this node keeps no snapshot copy".into(),
            Some(
                "set snapshot_copy = \"DIR\" under [agent] in its config and restart the agent"
                    .into(),
            ),
        );
    };
    let key = key.map(|k| k.key).unwrap_or_default();
    if !key.is_empty() && part_of(&key).is_none() {
        return error_response(
            StatusCode::BAD_REQUEST,
            format!("{key:?} is not a repository file"),
            None,
        );
    }
    match tokio::task::spawn_blocking(move || f(DirStore::new(&dir), key)).await {
        Ok(Ok(answer)) => answer.into_response(),
        Ok(Err(e)) => error_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
        Err(e) => error_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}

/// `GET /v1/agent/copy/list`: every file of the copy, with its size.
pub async fn list(State(host): State<CopyHost>, Extension(signed): Extension<Signed>) -> Response {
    on_copy(host, &signed, None, |store, _| store.list().map(axum::Json)).await
}

/// `GET /v1/agent/copy/file?key=…`.
pub async fn get(
    State(host): State<CopyHost>,
    Extension(signed): Extension<Signed>,
    Query(key): Query<CopyKey>,
) -> Response {
    on_copy(host, &signed, Some(key), |store, key| store.get(&key)).await
}

/// `POST /v1/agent/copy/file?key=…` with the file's bytes: written whole, then renamed.
pub async fn put(
    State(host): State<CopyHost>,
    Extension(signed): Extension<Signed>,
    Query(key): Query<CopyKey>,
    body: Bytes,
) -> Response {
    on_copy(host, &signed, Some(key), move |store, key| {
        store.put(&key, &body).map(|()| StatusCode::OK)
    })
    .await
}

/// `DELETE /v1/agent/copy/file?key=…`.
pub async fn delete(
    State(host): State<CopyHost>,
    Extension(signed): Extension<Signed>,
    Query(key): Query<CopyKey>,
) -> Response {
    on_copy(host, &signed, Some(key), |store, key| {
        store.delete(&key).map(|()| StatusCode::OK)
    })
    .await
}
