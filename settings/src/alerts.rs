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
    /// A file holding the webhook's URL, readable by its owner only: a bot's URL is its key,
    /// and `labpool.toml` is read by every member's CLI. Read by the controller as it starts.
    pub webhook_file: Option<std::path::PathBuf>,
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
            webhook_file: None,
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
    /// For the controller as it starts: the URL from `webhook_file` (a file only its owner may
    /// read), and a warning when the URL sits in a config file others can read.
    pub fn resolve_webhook(
        &mut self,
        config_file: &std::path::Path,
    ) -> Result<Option<String>, String> {
        use std::os::unix::fs::MetadataExt;
        if let Some(path) = &self.webhook_file {
            let url = labpool_cluster::read_owner_only(path, "they could post as the bot")
                .map_err(|why| format!("[alerts] webhook_file {}: {why}", path.display()))?;
            let url = url.trim().to_string();
            if !url.starts_with("http://") {
                return Err(format!(
                    "[alerts] webhook_file {}: give an http:// URL (https is not supported; use a local relay)",
                    path.display()
                ));
            }
            self.webhook = Some(url);
            return Ok(None);
        }
        let readable = std::fs::metadata(config_file).is_ok_and(|m| m.mode() & 0o004 != 0);
        Ok((self.webhook.is_some() && readable).then(|| {
            format!(
                "[alerts] webhook is written in {}, which every user can read, and a bot's URL is its key: move it to a file of its own (mode 0600) named by [alerts] webhook_file",
                config_file.display()
            )
        }))
    }

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
        if self.webhook.is_some() && self.webhook_file.is_some() {
            problems.push(
                "[alerts]: give the webhook's URL once, as webhook or (better) webhook_file".into(),
            );
        }
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
