//! The pool now: every node and its GPUs, who holds each, with utilisation and temperature.

use super::{ok, refused};
use crate::WebState;
use crate::api::{JobView, NodeView};
use crate::layout::page as shell;
use crate::session::LoggedIn;
use axum::extract::State;
use axum::response::Response;
use labpool_scheduler::JobState;
use maud::html;
use std::collections::BTreeMap;

/// A GPU hotter than this is marked.
const HOT_C: u32 = 85;

pub(super) async fn page(State(state): State<WebState>, me: LoggedIn) -> Response {
    let ctx = &me.ctx;
    let nodes: Vec<NodeView> = match state.api.get(ctx.uid, "/v1/nodes").await {
        Ok(n) => n,
        Err(r) => return refused(ctx, "/", r),
    };
    let jobs: Vec<JobView> = match state.api.get(ctx.uid, "/v1/jobs").await {
        Ok(j) => j,
        Err(r) => return refused(ctx, "/", r),
    };
    let by_id: BTreeMap<u64, &JobView> = jobs.iter().map(|j| (j.id, j)).collect();
    let total: usize = nodes.iter().map(|n| n.gpus.len()).sum();
    let free: u32 = nodes.iter().map(|n| n.gpus_free).sum();
    let waiting = jobs.iter().filter(|j| j.state == JobState::Pending).count();
    let running = jobs.len() - waiting;
    let body = html! {
        p.summary {
            (free) " / " (total) " " (ctx.t("GPUs free")) " · "
            (running) " " (ctx.t("Running")) " · "
            a href="/queue" { (waiting) " " (ctx.t("waiting")) }
        }
        table.nodes {
            tr { th { (ctx.t("Node")) } th { (ctx.t("State")) } th { (ctx.t("GPUs")) } }
            @for n in &nodes {
                tr data-node=(n.name) {
                    td { b { (n.name) } br; span.muted { (n.gpus_free) " " (ctx.t("free")) } }
                    td { (n.state_text()) @if let Some(r) = &n.reason { br; span.muted { (r) } } }
                    td { div.gpus {
                        @for g in &n.gpus {
                            @let holders: Vec<&JobView> = g.jobs.iter().filter_map(|id| by_id.get(id).copied()).collect();
                            @let hot = g.temperature_c.is_some_and(|t| t >= HOT_C);
                            div class={ "gpu" @if !g.jobs.is_empty() { " busy" } @if hot { " hot" } } data-gpu=(g.index) {
                                b { (g.index) } " " (g.gpu_type)
                                @if let Some(u) = g.util_percent { " · " (u) "%" }
                                @if let Some(t) = g.temperature_c { " · " (t) "°C" }
                                br;
                                @if holders.is_empty() && !g.jobs.is_empty() {
                                    @for id in &g.jobs { a href={ "/jobs/" (id) } { "#" (id) } " " }
                                } @else if holders.is_empty() {
                                    span.muted { (ctx.t("free")) }
                                } @else {
                                    @for j in &holders {
                                        a href={ "/jobs/" (j.id) } { "#" (j.display_id()) } " " (j.user) " "
                                        @if let Some(part) = g.part_of(j.id) { span.slice { "(" (part) ")" } " " }
                                    }
                                }
                                @if let Some(left) = g.part_free() { br; span.muted { (left) " " (ctx.t("free")) } }
                            }
                        }
                    } }
                }
            }
        }
    };
    ok(shell(ctx, "/", ctx.t("Pool"), true, body))
}
