//! Alerts, for admins: what fires now, what is about to, and what resolved lately.

use super::{ok, refused};
use crate::WebState;
use crate::api::alerts::AlertsView;
use crate::layout::{page as shell, problem};
use crate::session::LoggedIn;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use labpool_monitor::alerts::Alert;
use maud::{Markup, html};

pub(super) async fn page(State(state): State<WebState>, me: LoggedIn) -> Response {
    let ctx = &me.ctx;
    if !ctx.admin {
        return crate::respond(
            StatusCode::FORBIDDEN,
            problem(
                ctx,
                "/",
                ctx.t("Alerts are for admins."),
                Some("`labpool alerts` shows a member the alerts about them"),
            ),
        );
    }
    let view: AlertsView = match state.api.get(ctx.uid, "/v1/alerts").await {
        Ok(v) => v,
        Err(r) => return refused(ctx, "/alerts", r),
    };
    let list = |title: &'static str, alerts: &[Alert]| -> Markup {
        html! {
            h2 { (ctx.t(title)) " " span.muted { (alerts.len()) } }
            @if alerts.is_empty() { p.muted { (ctx.t("No alert.")) } }
            @else {
                table.alerts {
                    @for a in alerts {
                        tr { td { b { (a.rule) } } td { (a.subject) } td { (a.text) } }
                    }
                }
            }
        }
    };
    let body = html! {
        (list("Firing", &view.firing))
        (list("Pending", &view.pending))
        (list("Resolved", &view.resolved))
    };
    ok(shell(ctx, "/alerts", ctx.t("Alerts"), true, body))
}
