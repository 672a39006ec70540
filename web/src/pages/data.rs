//! Datasets and each node's cache: what is registered, which versions sit on which node, and
//! what is being staged now.

use super::{ok, refused};
use crate::WebState;
use crate::api::data::{CacheStatus, DatasetView};
use crate::layout::{page as shell, when};
use crate::session::LoggedIn;
use axum::extract::State;
use axum::response::Response;
use labpool_units::format_size;
use maud::html;

pub(super) async fn page(State(state): State<WebState>, me: LoggedIn) -> Response {
    let ctx = &me.ctx;
    let datasets: Vec<DatasetView> = match state.api.get(ctx.uid, "/v1/datasets").await {
        Ok(d) => d,
        Err(r) => return refused(ctx, "/data", r),
    };
    let caches: Vec<CacheStatus> = match state.api.get(ctx.uid, "/v1/cache").await {
        Ok(c) => c,
        Err(r) => return refused(ctx, "/data", r),
    };
    let body = html! {
        h2 { (ctx.t("Datasets")) }
        table.datasets {
            tr { th { (ctx.t("Name")) } th { (ctx.t("Path")) } th { (ctx.t("Version")) } th.num { (ctx.t("Files")) } th.num { (ctx.t("Size")) } th.num { (ctx.t("Versions")) } th { "" } }
            @for d in &datasets {
                tr data-dataset=(d.name) {
                    td { b { (d.name) } @if !d.description.is_empty() { br; span.muted { (d.description) } } }
                    td { (d.path.display()) }
                    td { code { (d.current) } }
                    td.num { (d.files) }
                    td.num { (format_size(d.bytes)) }
                    td.num { (d.versions) }
                    td.muted { "$" (d.env_var) }
                }
            }
        }
        h2 { (ctx.t("Caches")) }
        @for c in &caches {
            section.cache data-node=(c.node) {
                h3 { (c.node) " " span.muted { (format_size(c.used_bytes)) " / " (format_size(c.capacity)) } }
                table {
                    tr { th { (ctx.t("Name")) } th { (ctx.t("Version")) } th.num { (ctx.t("Size")) } th { (ctx.t("State")) } th { "" } }
                    @for v in &c.versions {
                        tr {
                            td { (v.name) }
                            td { code { (v.version) } @if v.current { " ✓" } }
                            td.num { (format_size(v.bytes)) }
                            td { @if v.complete { "complete" } @else { "partial" }
                                 @if !v.pinned_by.is_empty() { " · " @for j in &v.pinned_by { a href={ "/jobs/" (j) } { "#" (j) } " " } } }
                            td.muted { (v.last_use.as_deref().map(when).unwrap_or_default()) }
                        }
                    }
                    @for s in &c.staging {
                        tr { td { (s.name) } td { code { (s.version) } } td.num { (format_size(s.progress.bytes_done)) " / " (format_size(s.progress.bytes_total)) } td { (ctx.t("Staging")) " · " (s.purpose) } td {} }
                    }
                }
            }
        }
    };
    ok(shell(ctx, "/data", ctx.t("Data"), true, body))
}
