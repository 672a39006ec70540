//! My jobs: those in the queue with the tail of their output and a cancel button, and the ones
//! that ended lately.

use super::{ok, refused};
use crate::WebState;
use crate::api::{HistoryPage, HistoryQuery, JobView, JobsQuery};
use crate::layout::{Ctx, PageQuery, page as shell, page_range, pager, when};
use crate::session::LoggedIn;
use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};

/// Lines of output shown per job on the list.
const LIST_LINES: usize = 8;

/// How many ended jobs the list shows.
const RECENT: u32 = 20;

/// Jobs in the queue a page shows, each with its output.
const PER_PAGE: usize = 25;

pub(super) async fn page(
    State(state): State<WebState>,
    Query(q): Query<PageQuery>,
    me: LoggedIn,
) -> Response {
    let ctx = &me.ctx;
    let mine = JobsQuery {
        user: Some(ctx.user.clone()),
    };
    let active: Vec<JobView> = match state.api.get_query(ctx.uid, "/v1/jobs", &mine).await {
        Ok(j) => j,
        Err(r) => return refused(ctx, "/jobs", r),
    };
    let recent = HistoryQuery {
        user: Some(ctx.user.clone()),
        limit: Some(RECENT),
        ..HistoryQuery::default()
    };
    let ended: HistoryPage = match state.api.get_query(ctx.uid, "/v1/history", &recent).await {
        Ok(h) => h,
        Err(r) => return refused(ctx, "/jobs", r),
    };
    let total = active.len();
    let active = &active[page_range(q.page, PER_PAGE, total)];
    let mut outputs = Vec::new();
    for j in active {
        outputs.push(output(j, LIST_LINES).await);
    }
    let body = html! {
        h2 { (ctx.t("Running and waiting")) }
        @if total == 0 { p { (ctx.t("You have no jobs in the queue.")) } }
        (pager(ctx, "/jobs", q.page, PER_PAGE, total))
        @for (j, out) in active.iter().zip(&outputs) {
            section.job data-job=(j.id) {
                h3 {
                    a href={ "/jobs/" (j.id) } { "#" (j.display_id()) " " (j.name) } " "
                    span class={ "state-" (j.state.as_str()) } { (j.state.as_str()) }
                }
                p.muted { (summary(ctx, j)) }
                @if let Some(text) = out { pre.output { (text) } }
                (cancel_form(ctx, j))
            }
        }
        h2 { (ctx.t("Recently finished")) }
        table {
            tr { th { (ctx.t("Job")) } th { (ctx.t("Name")) } th { (ctx.t("State")) } th { (ctx.t("Exit")) } th { (ctx.t("Ended")) } th { (ctx.t("Elapsed")) } }
            @for j in &ended.jobs {
                tr data-job=(j.id) {
                    td { a href={ "/jobs/" (j.id) } { (j.display_id()) } }
                    td { (j.name) }
                    td class={ "state-" (j.state.as_str()) } { (j.state.as_str()) }
                    td { (crate::api::cells::exit_text(j.exit_code, j.signal)) }
                    td { (j.end_time.as_deref().map(when).unwrap_or_default()) }
                    td { (j.elapsed_s.map(labpool_units::format_elapsed).unwrap_or_default()) }
                }
            }
        }
    };
    ok(shell(ctx, "/jobs", ctx.t("My jobs"), true, body))
}

/// Where and on what a job runs, or what it waits for, in one line.
pub(super) fn summary(ctx: &Ctx, j: &JobView) -> String {
    let gpus = if j.gpus.is_empty() {
        format!("{} {}", j.gpus_requested, ctx.t("GPUs"))
    } else {
        format!("{} {}", ctx.t("GPUs"), crate::api::cells::gpu_list(&j.gpus))
    };
    match &j.node {
        Some(node) => format!(
            "{node} · {gpus} · {} {}",
            ctx.t("Elapsed"),
            labpool_units::format_elapsed(j.elapsed_s.unwrap_or(0))
        ),
        None => format!(
            "{} · {gpus} · {}",
            j.partition,
            [j.reason.as_deref(), j.reason_detail.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ")
        ),
    }
}

/// The last `lines` of a job's standard output, when the controller can read it here and the
/// job has started; the reason it cannot otherwise.
pub(super) async fn output(j: &JobView, lines: usize) -> Option<String> {
    let path = j.stdout.clone()?;
    let owner = j.uid;
    tokio::task::spawn_blocking(move || {
        crate::output_tail::tail(&path, owner, lines).map_err(|e| e.to_string())
    })
    .await
    .ok()
    .map(|r| r.unwrap_or_else(|e| e))
}

/// A cancel button, for a job that has not ended and that the viewer may cancel (its owner or
/// an admin; the API decides again when it is pressed).
pub(super) fn cancel_form(ctx: &Ctx, j: &JobView) -> Markup {
    html! {
        @if !j.state.is_finished() && (j.uid == ctx.uid || ctx.admin) {
            form.cancel method="post" action={ "/jobs/" (j.id) "/cancel" } {
                (ctx.csrf_field())
                button.danger type="submit" { (ctx.t("Cancel")) " #" (j.display_id()) }
            }
        }
    }
}
