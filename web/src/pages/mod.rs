//! The dashboard's pages, one file each.

mod alerts;
mod data;
mod job;
mod jobs;
mod me;
mod pool;
mod queue;
mod snapshots;

use super::WebState;
use super::api_call::Refused;
use super::layout::{Ctx, problem};
use super::respond;
use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};

/// Every page's route.
pub(super) fn routes() -> Router<WebState> {
    Router::new()
        .route("/", get(pool::page))
        .route("/queue", get(queue::page))
        .route("/jobs", get(jobs::page))
        .route("/jobs/{id}", get(job::page))
        .route("/jobs/{id}/cancel", post(job::cancel))
        .route("/me", get(me::page))
        .route("/data", get(data::page))
        .route("/snapshots", get(snapshots::page))
        .route("/snapshots/restore", post(snapshots::restore))
        .route("/snapshots/restores/{id}", get(snapshots::progress))
        .route("/alerts", get(alerts::page))
}

/// The API's refusal as a page, with its status (403 stays 403).
pub(super) fn refused(ctx: &Ctx, active: &str, r: Refused) -> Response {
    respond(
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        problem(ctx, active, &r.body.error, r.body.hint.as_deref()),
    )
}

/// A form that did not come from our own page, refused before it reaches the API.
pub(super) fn forged(ctx: &Ctx, active: &str) -> Response {
    respond(
        StatusCode::FORBIDDEN,
        problem(
            ctx,
            active,
            "this form did not come from a labpool page (its CSRF token is missing or wrong, or the browser says it is cross-site); nothing was done",
            Some("reload the page and try again"),
        ),
    )
}

/// An `Ok` page.
pub(super) fn ok(page: maud::Markup) -> Response {
    respond(StatusCode::OK, page)
}
