//! `POST /v1/web/login`: a one-time URL that logs a browser in as the caller (`labpool web`).

use serde::{Deserialize, Serialize};

/// What `labpool web` asks for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    /// The dashboard page to open after login (`/queue`, `/jobs/12`) [default: the pool].
    #[serde(default)]
    pub next: Option<String>,
}

/// The login URL for the caller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoginUrl {
    /// Open this in a browser; it works once.
    pub url: String,
    /// Seconds it stays valid.
    pub expires_in_s: u64,
    /// Whose session it opens.
    pub user: String,
}
