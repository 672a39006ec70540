//! Snapshots: find a file I deleted or broke, and restore a version of it, with the restore's
//! progress. The API decides what a member may see and restore (only their own files).

use super::{forged, ok, refused};
use crate::WebState;
use crate::api::snapshots::{
    FindRequest, RestoreRequest, RestoreStarted, RestoreStatus, SnapshotView,
};
use crate::layout::page as shell;
use crate::session::LoggedIn;
use axum::extract::{Form, Path, Query, State};
use axum::response::Response;
use labpool_snapshots::browse::FindReport;
use labpool_units::format_size;
use maud::html;
use serde::Deserialize;

/// Snapshots listed under the search.
const RECENT: usize = 10;

/// `?path=`.
#[derive(Deserialize)]
pub(super) struct FindQuery {
    path: Option<String>,
}

pub(super) async fn page(
    State(state): State<WebState>,
    Query(q): Query<FindQuery>,
    me: LoggedIn,
) -> Response {
    let ctx = &me.ctx;
    let path = q.path.filter(|p| !p.trim().is_empty());
    let found: Option<FindReport> = match &path {
        Some(p) => {
            let req = FindRequest {
                path: p.trim().into(),
            };
            match state.api.post(ctx.uid, "/v1/snapshots/find", &req).await {
                Ok(f) => Some(f),
                Err(r) => return refused(ctx, "/snapshots", r),
            }
        }
        None => None,
    };
    let recent: Vec<SnapshotView> = match state.api.get(ctx.uid, "/v1/snapshots").await {
        Ok(s) => s,
        Err(r) => return refused(ctx, "/snapshots", r),
    };
    let body = html! {
        h2 { (ctx.t("Find a deleted file")) }
        form.find method="get" action="/snapshots" {
            label { (ctx.t("Path")) " " input type="text" name="path" value=(path.as_deref().unwrap_or("")) placeholder="/home/you/thesis/main.tex"; }
            " " button type="submit" { (ctx.t("Find")) }
        }
        @if let Some(f) = &found {
            @if let (Some(last), Some(gone)) = (&f.last_seen, &f.gone_in) {
                p { (f.path) ": " (ctx.t("gone")) " " span.muted { "(" (last) " → " (gone) ")" } }
            }
            table.sightings {
                tr { th { (ctx.t("Snapshot")) } th { (ctx.t("Time")) } th { (ctx.t("Present")) } th.num { (ctx.t("Size")) } th {} }
                @for s in f.sightings.iter().rev() {
                    tr data-snapshot=(s.snapshot) {
                        td { code { (s.snapshot.get(..8).unwrap_or(&s.snapshot)) } }
                        td { (crate::clock::when(s.time.timestamp_millis())) }
                        td { @if s.present { "✓" } @else { span.muted { (ctx.t("gone")) } } }
                        td.num { (s.size.map(format_size).unwrap_or_default()) }
                        td {
                            @if s.present {
                                form.restore method="post" action="/snapshots/restore" {
                                    (ctx.csrf_field())
                                    input type="hidden" name="path" value=(f.path);
                                    input type="hidden" name="at" value=(s.snapshot);
                                    button type="submit" { (ctx.t("Restore")) }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { (ctx.t("Recent snapshots")) }
        table {
            tr { th { (ctx.t("Snapshot")) } th { (ctx.t("Time")) } th { (ctx.t("Path")) } th.num { (ctx.t("Files")) } th.num { (ctx.t("Size")) } }
            @for s in recent.iter().rev().take(RECENT) {
                tr { td { code { (s.id.get(..8).unwrap_or(&s.id)) } } td { (crate::clock::when(s.time.timestamp_millis())) }
                     td { (s.source) " " span.muted { (s.path.display()) } } td.num { (s.files) } td.num { (format_size(s.bytes)) } }
            }
        }
    };
    ok(shell(ctx, "/snapshots", ctx.t("Snapshots"), false, body))
}

/// The restore form.
#[derive(Deserialize)]
pub(super) struct RestoreForm {
    #[serde(default)]
    csrf: String,
    path: String,
    at: Option<String>,
}

/// `POST /snapshots/restore`: restores the path as it was in that snapshot, to where it was.
pub(super) async fn restore(
    State(state): State<WebState>,
    me: LoggedIn,
    Form(form): Form<RestoreForm>,
) -> Response {
    let ctx = &me.ctx;
    if !me.form_ok(&form.csrf) {
        return forged(ctx, "/snapshots");
    }
    let req = RestoreRequest {
        path: form.path.into(),
        at: form.at,
        target: None,
        overwrite: false,
    };
    match state
        .api
        .post::<_, RestoreStarted>(ctx.uid, "/v1/snapshots/restore", &req)
        .await
    {
        Ok(started) => crate::see_other(&format!("/snapshots/restores/{}", started.id)),
        Err(r) => refused(ctx, "/snapshots", r),
    }
}

/// A restore's progress, refreshed until it ends.
pub(super) async fn progress(
    State(state): State<WebState>,
    Path(id): Path<u64>,
    me: LoggedIn,
) -> Response {
    let ctx = &me.ctx;
    let st: RestoreStatus = match state
        .api
        .get(ctx.uid, &format!("/v1/snapshots/restores/{id}"))
        .await
    {
        Ok(s) => s,
        Err(r) => return refused(ctx, "/snapshots", r),
    };
    let done = st.report.is_some() || st.error.is_some();
    let body = html! {
        p { progress max=(st.total_bytes.max(1)) value=(st.bytes) {} " "
            (format_size(st.bytes)) " / " (format_size(st.total_bytes)) " · " (st.entries) }
        @if let Some(r) = &st.report {
            p.done { b { (ctx.t("Done")) } ": " (r.restored_to.display()) " · " (r.files) " " (ctx.t("Files")) " · " (format_size(r.bytes)) }
            @if r.skipped_not_owned > 0 { p.hint { (r.skipped_not_owned) " not yours, skipped" } }
        }
        @if let Some(e) = &st.error { p.problem { (e) } }
        p { a href="/snapshots" { (ctx.t("Back")) } }
    };
    let title = if st.error.is_some() {
        ctx.t("Failed")
    } else if done {
        ctx.t("Done")
    } else {
        ctx.t("Restoring")
    };
    ok(shell(ctx, "/snapshots", title, !done, body))
}
