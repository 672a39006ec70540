//! Logging a browser in, the way Jupyter does: `labpool web` asks the controller, over its Unix
//! socket (so the uid is the kernel's word, never the client's), for a one-time login token.
//! The browser trades the token for a session cookie (HttpOnly, SameSite=Strict), and every form
//! it posts carries the session's CSRF token. Tokens and sessions live in the controller's
//! memory: a restart logs every browser out, which is the safe side.

use crate::link_auth::random_hex;
use axum::http::HeaderMap;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const COOKIE: &str = "labpool_session";

/// Unused login tokens one user may hold; a new one drops their oldest.
const TOKENS_PER_USER: usize = 8;

/// Sessions one user may hold (browsers, devices); a new one ends their oldest.
const SESSIONS_PER_USER: usize = 16;

/// A logged-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// Whose session it is: the uid that asked for the login token.
    pub uid: u32,
    /// The token every form of this session carries.
    pub csrf: String,
    expires: Instant,
}

/// Why a login URL was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "this login link has expired or was already used (links last {lifetime}); run `labpool web` for a new one"
)]
pub struct LoginRefused {
    /// How long links last, for the message.
    pub lifetime: String,
}

#[derive(Default)]
struct Store {
    tokens: BTreeMap<String, (u32, Instant)>,
    sessions: BTreeMap<String, Session>,
}

/// Removes one user's entries of `map` (those `theirs` gives an expiry for), soonest to expire
/// first, until one more fits under `most`.
fn make_room<V>(
    map: &mut BTreeMap<String, V>,
    most: usize,
    theirs: impl Fn(&V) -> Option<Instant>,
) {
    let mut mine: Vec<(Instant, String)> = map
        .iter()
        .filter_map(|(k, v)| Some((theirs(v)?, k.clone())))
        .collect();
    mine.sort();
    for (_, old) in mine.iter().take((mine.len() + 1).saturating_sub(most)) {
        map.remove(old);
    }
}

/// One-time login tokens and the sessions they opened.
pub struct Logins {
    store: Mutex<Store>,
    token_lifetime: Duration,
    session_lifetime: Duration,
    base: OnceLock<String>,
}

impl Logins {
    /// An empty store.
    pub fn new(token_lifetime: Duration, session_lifetime: Duration) -> Logins {
        Logins {
            store: Mutex::default(),
            token_lifetime,
            session_lifetime,
            base: OnceLock::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records where the dashboard listens (`http://HOST:PORT`), once it is bound.
    pub fn set_base(&self, base: String) {
        let _ = self.base.set(base);
    }

    /// Where the dashboard listens; None while it is off or not bound.
    pub fn base(&self) -> Option<&str> {
        self.base.get().map(String::as_str)
    }

    /// How long a login token lasts.
    pub fn token_lifetime(&self) -> Duration {
        self.token_lifetime
    }

    /// A new one-time token for `uid`. Expired tokens and sessions are dropped on the way.
    pub fn issue(&self, uid: u32) -> String {
        let now = Instant::now();
        let token = random_hex(32);
        let mut store = self.lock();
        store.tokens.retain(|_, (_, until)| *until > now);
        store.sessions.retain(|_, s| s.expires > now);
        // Each user's tokens are bounded, so the store (and this scan) is bounded by the pool's
        // users, however often anyone asks.
        make_room(&mut store.tokens, TOKENS_PER_USER, |(u, until)| {
            (*u == uid).then_some(*until)
        });
        store
            .tokens
            .insert(token.clone(), (uid, now + self.token_lifetime));
        token
    }

    /// Trades a token for a new session (id, session). A token works once, and only before it
    /// expires.
    pub fn redeem(&self, token: &str) -> Result<(String, Session), LoginRefused> {
        let now = Instant::now();
        let mut store = self.lock();
        let refused = || LoginRefused {
            lifetime: labpool_units::format_duration(self.token_lifetime),
        };
        let (uid, until) = store.tokens.remove(token).ok_or_else(refused)?;
        if until <= now {
            return Err(refused());
        }
        let id = random_hex(32);
        let session = Session {
            uid,
            csrf: random_hex(32),
            expires: now + self.session_lifetime,
        };
        make_room(&mut store.sessions, SESSIONS_PER_USER, |s| {
            (s.uid == uid).then_some(s.expires)
        });
        store.sessions.insert(id.clone(), session.clone());
        Ok((id, session))
    }

    /// The live session a cookie names.
    pub fn session(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        self.lock()
            .sessions
            .get(id)
            .filter(|s| s.expires > now)
            .cloned()
    }

    /// Ends a session (logout).
    pub fn end(&self, id: &str) {
        self.lock().sessions.remove(id);
    }

    /// The `Set-Cookie` value for a new session.
    pub fn cookie(&self, id: &str) -> String {
        format!(
            "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
            self.session_lifetime.as_secs()
        )
    }
}

/// The session id in a request's cookies.
pub fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Whether a state-changing request comes from the dashboard's own pages: the form's CSRF token
/// matches the session's, and the browser does not say the request is cross-site.
pub fn same_site_form(headers: &HeaderMap, session: &Session, form_csrf: &str) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let cross_site = header("sec-fetch-site").is_some_and(|s| s != "same-origin" && s != "none");
    // "null" is what a browser sends when it withholds the origin: the token decides then.
    let foreign_origin = match (header("origin").filter(|o| *o != "null"), header("host")) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_none_or(|(_, rest)| rest != host),
        (Some(_), None) => true,
        _ => false,
    };
    !cross_site && !foreign_origin && constant_time_eq(form_csrf, &session.csrf)
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_works_once_and_not_after_it_expires() {
        let logins = Logins::new(Duration::from_millis(50), Duration::from_secs(60));
        let t = logins.issue(1000);
        let (id, s) = logins.redeem(&t).expect("fresh token");
        assert_eq!(s.uid, 1000);
        assert_eq!(logins.session(&id).map(|s| s.uid), Some(1000));
        assert!(logins.redeem(&t).is_err(), "reused");
        let late = logins.issue(1000);
        std::thread::sleep(Duration::from_millis(80));
        assert!(logins.redeem(&late).is_err(), "expired");
        logins.end(&id);
        assert!(logins.session(&id).is_none());
    }

    /// A member who asks for logins in a loop holds a bounded number of tokens and sessions;
    /// others' are untouched.
    #[test]
    fn each_user_holds_a_bounded_number_of_tokens_and_sessions() {
        let logins = Logins::new(Duration::from_secs(60), Duration::from_secs(600));
        let alices = logins.issue(1);
        let (alice_session, _) = logins.redeem(&alices).unwrap();
        for _ in 0..1000 {
            let t = logins.issue(2);
            if logins.redeem(&t).is_err() {
                panic!("a fresh token was refused");
            }
            logins.issue(2);
        }
        let store = logins.lock();
        assert!(store.tokens.values().filter(|(u, _)| *u == 2).count() <= TOKENS_PER_USER);
        assert_eq!(
            store.sessions.values().filter(|s| s.uid == 2).count(),
            SESSIONS_PER_USER
        );
        drop(store);
        assert!(logins.session(&alice_session).is_some());
    }

    #[test]
    fn forms_need_the_sessions_token_and_no_foreign_origin() {
        let s = Session {
            uid: 1,
            csrf: "abc".into(),
            expires: Instant::now(),
        };
        let mut h = HeaderMap::new();
        h.insert("host", "127.0.0.1:9402".parse().unwrap());
        assert!(same_site_form(&h, &s, "abc"));
        assert!(!same_site_form(&h, &s, "abd"));
        assert!(!same_site_form(&h, &s, ""));
        h.insert("origin", "http://evil.example".parse().unwrap());
        assert!(!same_site_form(&h, &s, "abc"));
        h.insert("origin", "http://127.0.0.1:9402".parse().unwrap());
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(!same_site_form(&h, &s, "abc"));
    }
}
