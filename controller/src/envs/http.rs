//! API handlers for software environments. Members create, list, show and remove their own;
//! admins publish and remove shared ones.

use crate::api::envs::{CreateEnv, EnvCreated, EnvQuery, EnvRemoved, EnvView, RemoveEnv};
use crate::error::ApiError;
use crate::http::{AppState, Peer, body, caller};
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};

/// The environment routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/envs", get(list).post(create))
        .route("/v1/envs/rm", post(remove))
        .route("/v1/envs/{name}", get(show))
}

async fn create(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<CreateEnv>, JsonRejection>,
) -> Result<Json<EnvCreated>, ApiError> {
    let c = caller(&state, &peer)?;
    Ok(Json(state.envs.create(&c, body(req)?).await?))
}

async fn list(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Query(q): Query<EnvQuery>,
) -> Result<Json<Vec<EnvView>>, ApiError> {
    let c = caller(&state, &peer)?;
    Ok(Json(state.envs.list(&c, q.all).await?))
}

async fn show(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(name): Path<String>,
) -> Result<Json<EnvView>, ApiError> {
    let c = caller(&state, &peer)?;
    Ok(Json(state.envs.show(&c, &name).await?))
}

async fn remove(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<RemoveEnv>, JsonRejection>,
) -> Result<Json<EnvRemoved>, ApiError> {
    let c = caller(&state, &peer)?;
    Ok(Json(state.envs.remove(&c, body(req)?).await?))
}
