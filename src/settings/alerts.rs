//! `[alerts]`: where notices are posted, in which bot's shape, and the alert rules' thresholds.

use super::values::{de_duration, ser_duration};
use labpool_monitor::alerts::rules::Thresholds;
use labpool_monitor::webhook::Format;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[alerts]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertsConfig {
    /// A URL (`http://host:port/path`) that notices are POSTed to as JSON.
    pub webhook: Option<String>,
    /// The body's shape: generic, wecom, dingtalk, feishu or slack.
    pub webhook_format: Format,
    /// Addresses alerts and zombie notices are also mailed to, through `[mail] smtp`.
    pub mail_to: Vec<String>,
    /// A GPU above this, °C, for `gpu_temp_for`, fires.
    pub gpu_temp_celsius: f64,
    /// How long a GPU must stay hot before it fires.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub gpu_temp_for: Duration,
    /// A hot GPU resolves below this, °C.
    pub gpu_temp_clear_celsius: f64,
    /// A node unheard for this long fires (the seed's 5 minutes).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub node_lost_after: Duration,
    /// A disk (state, cache, scratch, home, backup) fuller than this, percent, fires.
    pub disk_percent: f64,
    /// No successful snapshot for this long fires.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub snapshot_max_age: Duration,
    /// An agent's clock this far from the controller's, seconds, fires.
    pub clock_skew_seconds: f64,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        let t = Thresholds::default();
        let d = |ms: i64| Duration::from_millis(ms as u64);
        AlertsConfig {
            webhook: None,
            webhook_format: Format::Generic,
            mail_to: Vec::new(),
            gpu_temp_celsius: t.gpu_temp_c,
            gpu_temp_for: d(t.gpu_temp_for_ms),
            gpu_temp_clear_celsius: t.gpu_temp_clear_c,
            node_lost_after: d(t.node_lost_ms),
            disk_percent: t.disk_percent,
            snapshot_max_age: d(t.snapshot_max_age_ms),
            clock_skew_seconds: t.clock_skew_s,
        }
    }
}

impl AlertsConfig {
    /// The thresholds, in the monitor's units.
    pub fn thresholds(&self) -> Thresholds {
        let ms = |d: Duration| d.as_millis() as i64;
        Thresholds {
            gpu_temp_c: self.gpu_temp_celsius,
            gpu_temp_clear_c: self.gpu_temp_clear_celsius,
            gpu_temp_for_ms: ms(self.gpu_temp_for),
            node_lost_ms: ms(self.node_lost_after),
            disk_percent: self.disk_percent,
            snapshot_max_age_ms: ms(self.snapshot_max_age),
            clock_skew_s: self.clock_skew_seconds,
        }
    }

    /// `webhook` is an http:// URL; the clear mark is not above the fire mark.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(w) = &self.webhook
            && !w.starts_with("http://")
        {
            problems.push(format!(
                "[alerts] webhook {w:?}: give an http:// URL (https is not supported; use a local relay)"
            ));
        }
        for a in self.mail_to.iter().filter(|a| !a.contains('@')) {
            problems.push(format!(
                "[alerts] mail_to {a:?}: give e-mail addresses, e.g. [\"admins@lab.example\"]"
            ));
        }
        if self.gpu_temp_clear_celsius > self.gpu_temp_celsius {
            problems.push(format!(
                "[alerts] gpu_temp_clear_celsius {} is above gpu_temp_celsius {}: give a clear mark at or below the fire mark",
                self.gpu_temp_clear_celsius, self.gpu_temp_celsius
            ));
        }
        if !(0.0..=100.0).contains(&self.disk_percent) {
            problems.push(format!(
                "[alerts] disk_percent {}: give 0 to 100",
                self.disk_percent
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}
