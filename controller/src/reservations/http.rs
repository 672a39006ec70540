//! API handlers for reservations.

use crate::api::reservations::{
    CreateReservation, DeleteReservation, ReservationChange, ReservationView,
};
use crate::engine::Request;
use crate::error::ApiError;
use crate::http::{AppState, Peer, ask, caller};
use axum::extract::State;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::JsonRejection;
use axum::routing::{get, post};
use axum::{Json, Router};

/// The reservation routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/reservations", get(list).post(create))
        .route("/v1/reservations/delete", post(delete))
}

async fn change(
    state: &AppState,
    peer: &Peer,
    change: ReservationChange,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    let caller = caller(state, peer)?;
    Ok(Json(
        ask(state, |reply| Request::Reservation {
            change,
            caller,
            reply,
        })
        .await??,
    ))
}

async fn list(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    change(&state, &peer, ReservationChange::List).await
}

async fn create(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<CreateReservation>, JsonRejection>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    let Json(req) = body
        .map_err(|e| ApiError::bad_request(format!("bad reservation: {}", e.body_text()), None))?;
    change(&state, &peer, ReservationChange::Create(req)).await
}

async fn delete(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Result<Json<DeleteReservation>, JsonRejection>,
) -> Result<Json<Vec<ReservationView>>, ApiError> {
    let Json(req) = body.map_err(|e| {
        ApiError::bad_request(format!("bad reservation delete: {}", e.body_text()), None)
    })?;
    change(&state, &peer, ReservationChange::Delete { name: req.name }).await
}
