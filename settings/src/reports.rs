//! `[reports]`: what usage reports show.

use serde::{Deserialize, Serialize};

/// `[reports]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportsConfig {
    /// The leaderboard in `labpool report`: "on", "anonymous" (members numbered by rank) or
    /// "off".
    pub leaderboard: labpool_reports::Leaderboard,
}
