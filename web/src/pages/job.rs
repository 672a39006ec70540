//! A job's page: what it asked for, where it runs, why it waits, its life so far, its GPU use,
//! and (for its owner and admins) the end of its output; and the cancel action.

use super::jobs::{cancel_form, output, summary};
use super::{forged, ok, refused};
use crate::WebState;
use crate::api::JobDetail;
use crate::api::{CancelOutcome, CancelRequest, WhyView};
use crate::layout::{page as shell, problem, when};
use crate::session::{CsrfForm, LoggedIn};
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

/// Lines of output on a job's page.
const PAGE_LINES: usize = 60;

pub(super) async fn page(
    State(state): State<WebState>,
    Path(id): Path<u64>,
    me: LoggedIn,
) -> Response {
    let ctx = &me.ctx;
    let detail: JobDetail = match state.api.get(ctx.uid, &format!("/v1/jobs/{id}")).await {
        Ok(d) => d,
        Err(r) => return refused(ctx, "/jobs", r),
    };
    let why: Option<WhyView> = state
        .api
        .get(ctx.uid, &format!("/v1/jobs/{id}/why"))
        .await
        .ok();
    let j = &detail.job;
    let mine = j.uid == ctx.uid || ctx.admin;
    // A running notebook of the member's: the button that opens it through the dashboard.
    let notebook = if mine && j.state == labpool_scheduler::JobState::Running {
        state
            .api
            .get::<crate::api::sessions::NotebookView>(ctx.uid, &format!("/v1/jobs/{id}/notebook"))
            .await
            .ok()
    } else {
        None
    };
    let out = if mine {
        output(j, PAGE_LINES).await
    } else {
        None
    };
    let field = |k: &'static str, v: String| html! { tr { th { (ctx.t(k)) } td { (v) } } };
    let title = format!("{} #{} {}", ctx.t("Job"), j.display_id(), j.name);
    let body = html! {
        p { span class={ "state-" (j.state.as_str()) } { b { (j.state.as_str()) } } " · " (summary(ctx, j)) }
        @if let Some(n) = &notebook {
            p { a.button.notebook href={ (n.base_url) "lab" } { (ctx.t("Open notebook")) } }
        }
        (cancel_form(ctx, j))
        table.fields {
            (field("User", j.user.clone()))
            (field("Partition", j.partition.clone()))
            (field("GPUs", format!("{}{}", j.gpus_requested, j.gpu_type.as_deref().map(|t| format!(":{t}")).unwrap_or_default())))
            (field("Submitted", when(&j.submit_time)))
            @if let Some(t) = &j.start_time { (field("Started", when(t))) }
            @if let Some(t) = &j.end_time { (field("Ended", when(t))) }
            @if j.state.is_finished() { (field("Exit", crate::api::cells::exit_text(j.exit_code, j.signal))) }
            (field("Working directory", j.workdir.display().to_string()))
            @if !j.datasets.is_empty() { (field("Datasets", j.datasets.join(", "))) }
            @if let Some(u) = &j.gpu_usage {
                (field("GPU utilisation", format!("{:.0}% (peak {:.0}%), {} MiB peak, {:.3} kWh", u.util_mean, u.util_peak, u.mem_peak_mib, u.energy_kwh)))
            }
        }
        @if let Some(w) = &why {
            h2 { (ctx.t("Reason")) }
            pre.why { (w.summary) @if let Some(n) = &w.note { "\n" (n.reason.to_string()) " (" (n.stage) ", #" (n.position) ")" } @for x in &w.warnings { "\n" (x) } }
        }
        @if mine {
            h2 { (ctx.t("Output")) @if let Some(p) = &j.stdout { " " span.muted { (p.display()) } } }
            pre.output { (out.unwrap_or_else(|| ctx.t("No output yet, or the controller cannot read it here.").to_string())) }
        }
        h2 { (ctx.t("Events")) }
        table.events {
            @for e in &detail.events {
                tr { td { (when(&e.time)) } td { (e.event) } td { (e.detail.as_deref().unwrap_or("")) } }
            }
        }
    };
    ok(shell(ctx, "/jobs", &title, !j.state.is_finished(), body))
}

/// `POST /jobs/{id}/cancel`: cancels through the API, which allows it for the owner and admins.
pub(super) async fn cancel(
    State(state): State<WebState>,
    Path(id): Path<u64>,
    me: LoggedIn,
    Form(form): Form<CsrfForm>,
) -> Response {
    let ctx = &me.ctx;
    if !me.form_ok(&form.csrf) {
        return forged(ctx, "/jobs");
    }
    let req = CancelRequest {
        ids: vec![id.to_string()],
    };
    let outcome: Vec<CancelOutcome> = match state.api.post(ctx.uid, "/v1/jobs/cancel", &req).await {
        Ok(o) => o,
        Err(r) => return refused(ctx, "/jobs", r),
    };
    match outcome.iter().find(|o| !o.ok) {
        Some(o) => crate::respond(
            StatusCode::FORBIDDEN,
            problem(ctx, &format!("/jobs/{id}"), &o.message, None),
        ),
        None => crate::see_other(&format!("/jobs/{id}")),
    }
}
