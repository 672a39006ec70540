//! `[alerts]`: where notices are posted.

use serde::{Deserialize, Serialize};

/// `[alerts]`.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AlertsConfig {
    /// A URL (`http://host:port/path`) that notices are POSTed to as JSON.
    pub webhook: Option<String>,
}

impl AlertsConfig {
    /// `webhook` is an http:// URL.
    pub(super) fn check(&self) -> Result<(), String> {
        if let Some(w) = &self.webhook
            && !w.starts_with("http://")
        {
            return Err(format!(
                "[alerts] webhook {w:?}: give an http:// URL (https is not supported; use a local relay)"
            ));
        }
        Ok(())
    }
}
