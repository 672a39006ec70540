//! `[web]`: the dashboard the controller serves to browsers (`labpool web` prints its login URL).

use super::values::{de_duration, ser_duration};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[web]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// Where the dashboard is served, `HOST:PORT`, or `"off"`. Loopback by default: it speaks
    /// plain HTTP, so reach it from elsewhere through `ssh -L`, not by listening wider. A port
    /// that is taken is logged and the controller runs on without it.
    pub listen: String,
    /// How long the one-time login URL that `labpool web` prints stays valid.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub login_token_lifetime: Duration,
    /// How long a browser stays logged in after it used a login URL.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub session_lifetime: Duration,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            listen: "127.0.0.1:9402".to_string(),
            login_token_lifetime: Duration::from_secs(120),
            session_lifetime: Duration::from_secs(12 * 3600),
        }
    }
}

impl WebConfig {
    /// The address to serve on, or None when switched off.
    pub fn address(&self) -> Option<&str> {
        (self.listen != "off").then_some(self.listen.as_str())
    }

    /// `listen` is `HOST:PORT` or `off`; both lifetimes are at least a second.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut problems: Vec<String> =
            super::values::listen_problem("web", &self.listen, "127.0.0.1:9402")
                .into_iter()
                .collect();
        for (key, d) in [
            ("login_token_lifetime", self.login_token_lifetime),
            ("session_lifetime", self.session_lifetime),
        ] {
            if d < Duration::from_secs(1) {
                problems.push(format!("[web] {key} {d:?}: give at least 1s"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}
