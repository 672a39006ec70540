//! The queue: each waiting job with what it waits for and, where the scheduler has reserved a
//! node for it, when it is expected to start.

use super::{ok, refused};
use crate::WebState;
use crate::api::{JobView, WhyView};
use crate::layout::{PageQuery, page as shell, page_range, pager, since};
use crate::session::LoggedIn;
use axum::extract::{Query, State};
use axum::response::Response;
use labpool_scheduler::JobState;
use maud::html;

/// Waiting jobs a page shows.
const PER_PAGE: usize = 100;

pub(super) async fn page(
    State(state): State<WebState>,
    Query(q): Query<PageQuery>,
    me: LoggedIn,
) -> Response {
    let ctx = &me.ctx;
    let jobs: Vec<JobView> = match state.api.get(ctx.uid, "/v1/jobs").await {
        Ok(j) => j,
        Err(r) => return refused(ctx, "/queue", r),
    };
    let mut waiting: Vec<(JobView, Option<WhyView>)> = Vec::new();
    for j in jobs.into_iter().filter(|j| j.state == JobState::Pending) {
        let why = state
            .api
            .get(ctx.uid, &format!("/v1/jobs/{}/why", j.id))
            .await
            .ok();
        waiting.push((j, why));
    }
    // The scheduler's order: the last pass's position, then by id.
    waiting.sort_by_key(|(j, w)| {
        (
            w.as_ref()
                .and_then(|w| w.note.as_ref())
                .map_or(usize::MAX, |n| n.position),
            j.id,
        )
    });
    let total = waiting.len();
    let shown = &waiting[page_range(q.page, PER_PAGE, total)];
    let body = html! {
        (pager(ctx, "/queue", q.page, PER_PAGE, total))
        @if waiting.is_empty() {
            p { (ctx.t("No job waits.")) }
        } @else {
            table.queue {
                tr {
                    th { "#" } th { (ctx.t("Job")) } th { (ctx.t("User")) } th { (ctx.t("Name")) }
                    th { (ctx.t("Partition")) } th.num { (ctx.t("GPUs")) } th { (ctx.t("Waited")) }
                    th { (ctx.t("Why it waits")) } th { (ctx.t("Estimated start")) }
                }
                @for (j, why) in shown {
                    @let note = why.as_ref().and_then(|w| w.note.as_ref());
                    tr data-job=(j.id) {
                        td.num { (note.map_or("-".to_string(), |n| n.position.to_string())) }
                        td { a href={ "/jobs/" (j.id) } { (j.display_id()) } }
                        td { (j.user) }
                        td { (j.name) }
                        td { (j.partition) }
                        td.num { (j.gpus_requested) @if let Some(t) = &j.gpu_type { ":" (t) } }
                        td { (since(&j.submit_time)) }
                        td.why {
                            (j.reason.as_deref().unwrap_or("-"))
                            @if let Some(d) = note.map(|n| n.reason.to_string()).or_else(|| j.reason_detail.clone()) {
                                br; span.muted { (d) }
                            }
                            @for w in why.iter().flat_map(|w| &w.warnings) { br; span.hint { (w) } }
                        }
                        td {
                            @match note.and_then(|n| n.reservation.as_ref()) {
                                Some((node, at)) => { (crate::layout::when(&crate::clock::rfc3339(at.0))) " · " (node) }
                                None => span.muted { (ctx.t("unknown")) }
                            }
                        }
                    }
                }
            }
            (pager(ctx, "/queue", q.page, PER_PAGE, total))
        }
    };
    ok(shell(ctx, "/queue", ctx.t("Queue"), true, body))
}
