//! Login, logout and the per-request context: who the session is, in which language, and
//! whether a posted form really comes from our own page.

use super::auth::{self, Session};
use super::i18n::Lang;
use super::layout::{Ctx, login_page};
use super::{WebState, respond, see_other};
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;

/// `?token=…&next=…`.
#[derive(Deserialize)]
pub(super) struct LoginQuery {
    token: Option<String>,
    next: Option<String>,
}

fn lang_of(headers: &HeaderMap) -> Lang {
    Lang::from_header(
        headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok()),
    )
}

/// A path on this dashboard (`/jobs/12`), never another site (`//evil`, `http://…`).
pub fn local_path(p: &str) -> bool {
    p.starts_with('/')
        && p.bytes().all(|b| b.is_ascii_graphic())
        && !p.contains('\\')
        && !p.starts_with("//")
        && !p.contains("/%")
}

/// `GET /login?token=T`: trades a one-time token for a session cookie, then goes to `next`.
pub(super) async fn login(
    State(state): State<WebState>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> Response {
    let lang = lang_of(&headers);
    let Some(token) = q.token else {
        return respond(StatusCode::UNAUTHORIZED, login_page(lang, None));
    };
    match state.logins.redeem(&token) {
        Ok((id, session)) => {
            tracing::info!(uid = session.uid, "web login");
            let next = q.next.filter(|n| local_path(n)).unwrap_or("/".into());
            let mut resp = see_other(&next);
            if let Ok(v) = state.logins.cookie(&id).parse() {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        Err(e) => respond(
            StatusCode::UNAUTHORIZED,
            login_page(lang, Some(&e.to_string())),
        ),
    }
}

/// `POST /logout`: ends the session and clears the cookie.
pub(super) async fn logout(
    State(state): State<WebState>,
    headers: HeaderMap,
    form: axum::extract::Form<CsrfForm>,
) -> Response {
    if let Some(id) = auth::session_id(&headers)
        && let Some(s) = state.logins.session(&id)
        && auth::same_site_form(&headers, &s, &form.csrf)
    {
        state.logins.end(&id);
    }
    let mut resp = see_other("/login");
    if let Ok(v) = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        auth::COOKIE
    )
    .parse()
    {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// A form that carries only the CSRF token.
#[derive(Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// No such page.
pub(super) async fn not_found(headers: HeaderMap) -> Response {
    let lang = lang_of(&headers);
    respond(
        StatusCode::NOT_FOUND,
        maud::html! {
            (maud::DOCTYPE)
            html lang=(lang.code()) {
                head { meta charset="utf-8"; title { "404 · labpool" } link rel="stylesheet" href="/static/style.css"; }
                body { main { h1 { "404" } p { a href="/" { (lang.t("Back")) } } } }
            }
        },
    )
}

/// A request from a logged-in browser: its context, and the session for form checks.
pub struct LoggedIn {
    /// Language, user and CSRF token for the page.
    pub ctx: Ctx,
    /// The session.
    pub session: Session,
    /// The request's headers (for the form check).
    pub headers: HeaderMap,
}

impl LoggedIn {
    /// Whether a posted form carries this session's token and is not cross-site.
    pub fn form_ok(&self, csrf: &str) -> bool {
        auth::same_site_form(&self.headers, &self.session, csrf)
    }
}

impl FromRequestParts<WebState> for LoggedIn {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &WebState,
    ) -> Result<Self, Self::Rejection> {
        let lang = lang_of(&parts.headers);
        let session = auth::session_id(&parts.headers)
            .and_then(|id| state.logins.session(&id))
            .ok_or_else(|| respond(StatusCode::UNAUTHORIZED, login_page(lang, None)))?;
        let who = crate::identity::resolve(session.uid, &state.config.controller.admin_group)
            .map_err(|e| {
                respond(
                    StatusCode::FORBIDDEN,
                    login_page(lang, Some(&e.to_string())),
                )
            })?;
        Ok(LoggedIn {
            ctx: Ctx {
                lang,
                uid: session.uid,
                user: who.user,
                admin: who.admin,
                csrf: session.csrf.clone(),
            },
            session,
            headers: parts.headers.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn next_stays_on_the_dashboard() {
        for ok in ["/", "/queue", "/jobs/12", "/snapshots?path=/home/a"] {
            assert!(local_path(ok), "{ok}");
        }
        for bad in [
            "//evil.example",
            "/\t/evil.example",
            "/\\evil",
            "http://x",
            "/ /x",
            "/%2F/evil",
            "queue",
        ] {
            assert!(!local_path(bad), "{bad}");
        }
    }
}
