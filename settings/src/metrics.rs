//! `[metrics]`: GPU sampling and the Prometheus endpoint; `[zombies]`: jobs that hold GPUs and do
//! not use them, and what is done about it.

use super::values::{de_duration, de_opt_duration, ser_duration, ser_opt_duration};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where the controller serves `/metrics` unless told: the port dcgm-exporter's dashboards
/// expect.
pub const CONTROLLER_METRICS: &str = "127.0.0.1:9400";

/// Where an agent serves its node's `/metrics` unless told: the next port, so that an agent
/// beside its controller (the usual first node), or beside a dcgm-exporter, does not clash.
pub const AGENT_METRICS: &str = "127.0.0.1:9401";

/// `[metrics]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Where `/metrics` is served, `HOST:PORT`, or `"off"`. The controller serves the whole
    /// pool there, and `labpool agent` its own node. Loopback by default, on
    /// [`CONTROLLER_METRICS`] or [`AGENT_METRICS`] (filled in as the file is read); a port that
    /// is taken is logged and the daemon runs on without metrics.
    pub listen: Option<String>,
    /// Time between two GPU readings on each node (the seed's `--collect-interval 5000`).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub sample_interval: Duration,
    /// Also serve each member's credits and quota use (`labpool_credits_*{user}`,
    /// `labpool_quota_*{user,fs}`). `/metrics` has no authentication and anyone on the node
    /// can read it, while the API shows a member only their own: off unless the endpoint is
    /// reachable by the admins' Prometheus alone.
    pub per_member: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: None,
            sample_interval: Duration::from_secs(5),
            per_member: false,
        }
    }
}

impl MetricsConfig {
    /// The address to serve on, or None when switched off.
    pub fn address(&self) -> Option<&str> {
        match self.listen.as_deref() {
            Some("off") => None,
            Some(listen) => Some(listen),
            None => Some(CONTROLLER_METRICS),
        }
    }

    /// Fills in the default address for the daemon the file is for: an agent's (`[agent]`)
    /// or the controller's.
    pub(super) fn resolve(&mut self, agent: bool) {
        if self.listen.is_none() {
            let default = if agent {
                AGENT_METRICS
            } else {
                CONTROLLER_METRICS
            };
            self.listen = Some(default.to_string());
        }
    }

    /// `listen` is `HOST:PORT` or `off`; the interval is at least 100 ms.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(listen) = &self.listen {
            problems.extend(super::values::listen_problem(
                "metrics",
                listen,
                CONTROLLER_METRICS,
            ));
        }
        if self.sample_interval < Duration::from_millis(100) {
            problems.push(format!(
                "[metrics] sample_interval {:?}: give at least 100ms (the default is 5s)",
                self.sample_interval
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// `[zombies]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZombiesConfig {
    /// Utilisation below this, percent, counts as low.
    pub low_util_percent: f64,
    /// How long low utilisation makes a zombie (the seed's 7 days).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub low_util_for: Duration,
    /// How long GPUs may be held with no process on them.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub no_process_for: Duration,
    /// How long GPU memory may stay held after the job's processes are gone.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub leak_for: Duration,
    /// After a zombie is found and its member told, when the admins are told, or "off".
    #[serde(
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub tell_admins_after: Option<Duration>,
    /// After a zombie is found, when it is cancelled, or "off" (the default: people decide).
    #[serde(
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub cancel_after: Option<Duration>,
}

impl Default for ZombiesConfig {
    fn default() -> Self {
        let r = labpool_monitor::zombie::Rules::default();
        let d = |ms: i64| Duration::from_millis(ms as u64);
        ZombiesConfig {
            low_util_percent: r.low_percent,
            low_util_for: d(r.low_for_ms),
            no_process_for: d(r.no_process_for_ms),
            leak_for: d(r.leak_for_ms),
            tell_admins_after: r.tell_admins_after_ms.map(d),
            cancel_after: r.cancel_after_ms.map(d),
        }
    }
}

impl ZombiesConfig {
    /// The rules, in the monitor's units.
    pub fn rules(&self) -> labpool_monitor::zombie::Rules {
        let ms = |d: Duration| d.as_millis() as i64;
        labpool_monitor::zombie::Rules {
            low_percent: self.low_util_percent,
            low_for_ms: ms(self.low_util_for),
            no_process_for_ms: ms(self.no_process_for),
            leak_for_ms: ms(self.leak_for),
            tell_admins_after_ms: self.tell_admins_after.map(ms),
            cancel_after_ms: self.cancel_after.map(ms),
        }
    }

    /// The low mark is a percentage.
    pub(super) fn check(&self) -> Result<(), String> {
        if !(0.0..=100.0).contains(&self.low_util_percent) {
            return Err(format!(
                "[zombies] low_util_percent {}: give 0 to 100 (the seed's rule is 5)",
                self.low_util_percent
            ));
        }
        Ok(())
    }
}
