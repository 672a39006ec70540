//! The page shell every dashboard page shares: navigation, who is logged in, the CSRF token for
//! forms, and the small script that refreshes a live page in place.

use super::i18n::Lang;
use maud::{DOCTYPE, Markup, html};

/// Who is looking, in which language, and the token their forms carry.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The page's language.
    pub lang: Lang,
    /// The session's uid.
    pub uid: u32,
    /// Its login name.
    pub user: String,
    /// Root or in the admin group.
    pub admin: bool,
    /// The session's CSRF token.
    pub csrf: String,
}

impl Ctx {
    /// A label in the page's language.
    pub fn t(&self, en: &'static str) -> &'static str {
        self.lang.t(en)
    }

    /// The hidden field every form posts.
    pub fn csrf_field(&self) -> Markup {
        html! { input type="hidden" name="csrf" value=(self.csrf); }
    }
}

/// The navigation's entries: path and label. Alerts only for admins.
fn nav(ctx: &Ctx) -> Vec<(&'static str, &'static str)> {
    let mut items = vec![
        ("/", "Pool"),
        ("/queue", "Queue"),
        ("/jobs", "My jobs"),
        ("/me", "Usage"),
        ("/data", "Data"),
        ("/snapshots", "Snapshots"),
    ];
    if ctx.admin {
        items.push(("/alerts", "Alerts"));
    }
    items
}

/// A whole page. `live` pages refresh their `<main>` every few seconds while visible.
pub fn page(ctx: &Ctx, active: &str, title: &str, live: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang=(ctx.lang.code()) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · labpool" }
                link rel="stylesheet" href="/static/style.css";
                @if live { script src="/static/refresh.js" defer {} }
            }
            body {
                header {
                    strong { "labpool" }
                    nav {
                        @for (href, label) in nav(ctx) {
                            a href=(href) class=[(href == active).then_some("on")] { (ctx.t(label)) }
                        }
                    }
                    span.who {
                        (ctx.t("Logged in as")) " " b { (ctx.user) }
                        @if ctx.admin { " (" (ctx.t("admin")) ")" }
                    }
                    form method="post" action="/logout" {
                        (ctx.csrf_field())
                        button type="submit" { (ctx.t("Log out")) }
                    }
                }
                main data-live=[live.then_some("1")] {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A page for someone not logged in.
pub fn login_page(lang: Lang, problem: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang=(lang.code()) {
            head {
                meta charset="utf-8";
                title { (lang.t("Log in")) " · labpool" }
                link rel="stylesheet" href="/static/style.css";
            }
            body {
                main.login {
                    h1 { "labpool" }
                    @if let Some(p) = problem { p.problem { (p) } }
                    p { (lang.t("Run `labpool web` on the pool and open the URL it prints.")) }
                    pre { "labpool web" }
                }
            }
        }
    }
}

/// A refusal or failure, with the API's words and hint.
pub fn problem(ctx: &Ctx, active: &str, error: &str, hint: Option<&str>) -> Markup {
    page(
        ctx,
        active,
        ctx.t("Refused"),
        false,
        html! {
            p.problem { (error) }
            @if let Some(h) = hint { p.hint { (h) } }
            p { a href=(active) { (ctx.t("Back")) } }
        },
    )
}

/// A time from the API (RFC 3339) as labpool writes moments everywhere
/// ([`crate::clock::when`]), local to the controller.
pub fn when(rfc3339: &str) -> String {
    crate::clock::parse_ms(rfc3339).map_or_else(|| rfc3339.to_string(), crate::clock::when)
}

/// How long ago an RFC 3339 time was, as labpool prints durations.
pub fn since(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .and_then(|t| (chrono::Utc::now() - t.to_utc()).to_std().ok())
        .map(labpool_units::format_duration_approx)
        .unwrap_or_default()
}

/// `?page=N`, from 0.
#[derive(Debug, Default, serde::Deserialize)]
pub struct PageQuery {
    /// Which page of a long list.
    #[serde(default)]
    pub page: usize,
}

/// The rows of page `page` of `total`, `per` a page.
pub fn page_range(page: usize, per: usize, total: usize) -> std::ops::Range<usize> {
    let start = page.saturating_mul(per).min(total);
    start..start.saturating_add(per).min(total)
}

/// "1–100 of 872", with links to the pages before and after.
pub fn pager(ctx: &Ctx, path: &str, page: usize, per: usize, total: usize) -> Markup {
    let r = page_range(page, per, total);
    html! {
        @if total > per {
            p.pager {
                (r.start + 1) "–" (r.end) " / " (total) " "
                @if page > 0 { a href={ (path) "?page=" (page - 1) } { "← " (ctx.t("Previous")) } " " }
                @if r.end < total { a href={ (path) "?page=" (page.saturating_add(1)) } { (ctx.t("Next")) " →" } }
            }
        }
    }
}
