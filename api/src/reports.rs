//! `GET /v1/report`: usage reports.

use serde::{Deserialize, Serialize};

/// `GET /v1/report`: a usage report over [from_ms, to_ms); of one member with `user`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReportQuery {
    /// From, ms.
    pub from_ms: i64,
    /// To, ms.
    pub to_ms: i64,
    /// The range's label.
    pub label: String,
    /// Only this member's jobs and ledger (members may ask for their own).
    #[serde(default)]
    pub user: Option<String>,
}
