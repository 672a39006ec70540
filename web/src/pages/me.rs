//! My credits, quota and usage: this month against the last, with charts.

use super::{ok, refused};
use crate::WebState;
use crate::api::CreditsView;
use crate::api::quotas::UserQuota;
use crate::api::reports::ReportQuery;
use crate::clock::{month_before, month_range};
use crate::layout::{Ctx, page as shell};
use crate::session::LoggedIn;
use axum::extract::State;
use axum::response::Response;
use labpool_reports::Report;
use labpool_units::format_size;
use maud::{Markup, PreEscaped, html};

/// Ledger lines shown.
const LEDGER_LINES: usize = 15;

pub(super) async fn page(State(state): State<WebState>, me: LoggedIn) -> Response {
    let ctx = &me.ctx;
    let credits: CreditsView = match state.api.get(ctx.uid, "/v1/credits").await {
        Ok(c) => c,
        Err(r) => return refused(ctx, "/me", r),
    };
    let quota: Option<UserQuota> = state
        .api
        .get_query(
            ctx.uid,
            "/v1/quota",
            &serde_json::json!({ "user": ctx.user }),
        )
        .await
        .ok();
    let month = chrono::Local::now().format("%Y-%m").to_string();
    let mut reports: Vec<Report> = Vec::new();
    for m in [Some(month.clone()), month_before(&month).ok()]
        .into_iter()
        .flatten()
    {
        let Ok((from_ms, to_ms)) = month_range(&m) else {
            continue;
        };
        let q = ReportQuery {
            from_ms,
            to_ms,
            label: m,
            user: Some(ctx.user.clone()),
        };
        match state.api.get_query(ctx.uid, "/v1/report", &q).await {
            Ok(r) => reports.push(r),
            Err(r) => return refused(ctx, "/me", r),
        }
    }
    let body = html! {
        h2 { (ctx.t("Credits")) " " span.muted { (credits.month) } }
        table {
            tr { th { (ctx.t("Balance")) } td.num { b { (format!("{:.1}", credits.balance)) } } }
            tr { th { (ctx.t("Granted")) } td.num { (format!("{:.1}", credits.granted)) } }
            tr { th { (ctx.t("Charged")) } td.num { (format!("{:.1}", credits.charged + credits.accruing)) } }
            tr { th { (ctx.t("Rebated")) } td.num { (format!("{:.1}", credits.rebated)) } }
            tr { th { (ctx.t("Emergency tokens left")) } td.num { (credits.tokens_left) " / " (credits.tokens_per_month) } }
        }
        (PreEscaped(labpool_reports::charts::bars(
            ctx.t("Credits"),
            &[
                (ctx.t("Granted").to_string(), credits.granted),
                (ctx.t("Charged").to_string(), credits.charged + credits.accruing),
                (ctx.t("Rebated").to_string(), credits.rebated),
            ],
            "",
        )))
        @if !credits.entries.is_empty() {
            table.ledger {
                @for e in credits.entries.iter().rev().take(LEDGER_LINES) {
                    tr { td { (crate::layout::when(&e.time)) } td { (e.kind) } td.num { (format!("{:+.2}", e.amount)) }
                         td { @if let Some(j) = e.job { a href={ "/jobs/" (j) } { "#" (j) } } } td.muted { (e.note.as_deref().unwrap_or("")) } }
                }
            }
        }
        h2 { (ctx.t("Quota")) }
        @match &quota {
            Some(q) => (quota_table(ctx, q)),
            None => p.muted { "-" },
        }
        h2 { (ctx.t("Usage")) }
        (usage(ctx, &reports))
    };
    ok(shell(ctx, "/me", ctx.t("Usage"), false, body))
}

fn quota_table(ctx: &Ctx, q: &UserQuota) -> Markup {
    html! {
        table.quota {
            tr { th { "" } th { (ctx.t("Path")) } th.num { (ctx.t("Used")) } th.num { (ctx.t("Limit")) } th { "" } }
            @for fs in &q.filesystems {
                @let used = fs.usage.as_ref().map(|u| u.bytes);
                @let limit = fs.limit.hard_bytes.or(fs.limit.soft_bytes);
                @let pct = fs.percent.unwrap_or(0.0);
                tr data-fs=(fs.fs) {
                    td { (fs.fs) }
                    td { (fs.user_dir.display()) }
                    td.num { (used.map(format_size).unwrap_or_else(|| "-".into())) }
                    td.num { (limit.map(format_size).unwrap_or_else(|| "-".into())) }
                    td { progress max="100" value=(format!("{:.0}", pct.clamp(0.0, 100.0))) {} " " (format!("{pct:.0}%")) }
                }
                @for m in &fs.messages { tr { td {} td colspan="4" .hint { (m) } } }
            }
        }
    }
}

fn usage(ctx: &Ctx, reports: &[Report]) -> Markup {
    let util = |r: &Report| r.total.utilisation_text();
    let col = |i: usize| reports.get(i);
    html! {
        table.usage {
            tr { th {} th.num { (ctx.t("This month")) } th.num { (ctx.t("Last month")) } }
            tr { th { (ctx.t("GPU-hours")) } @for i in 0..2 { td.num { (col(i).map(|r| format!("{:.1}", r.total.gpu_hours)).unwrap_or_default()) } } }
            tr { th { (ctx.t("Jobs")) } @for i in 0..2 { td.num { (col(i).map(|r| r.jobs.to_string()).unwrap_or_default()) } } }
            tr { th { (ctx.t("GPU utilisation")) } @for i in 0..2 { td.num { (col(i).map(util).unwrap_or_default()) } } }
        }
        (PreEscaped(labpool_reports::charts::bars(
            ctx.t("GPU-hours"),
            &reports.iter().map(|r| (r.label.clone(), r.total.gpu_hours)).collect::<Vec<_>>(),
            " h",
        )))
        @if let Some(r) = reports.first() {
            (PreEscaped(labpool_reports::charts::columns(ctx.t("My share of the pool by day"), &r.by_day, 100.0)))
        }
    }
}
