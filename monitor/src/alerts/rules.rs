//! The rules labpool ships: the seed lab's four (a hot GPU, a lost node, a full disk, a zombie
//! job) and the ones it learnt the hard way (ECC double-bit errors, a failed or stale snapshot,
//! an agent's clock skew, a member at the hard quota). Each threshold is configurable under
//! `[alerts]`; these are the defaults, and `deploy/prometheus/labpool-rules.yml` carries the
//! same numbers for labs that run Prometheus.

use super::{Rule, Severity};

/// Rule names, as `labpool alerts` and the webhook show them.
pub mod names {
    /// A GPU above its temperature mark.
    pub const GPU_TEMPERATURE: &str = "gpu_temperature";
    /// A node not heard from.
    pub const NODE_LOST: &str = "node_lost";
    /// A disk above its fill mark.
    pub const DISK_FULL: &str = "disk_full";
    /// A job holding GPUs it does not use.
    pub const ZOMBIE: &str = "zombie";
    /// Double-bit ECC errors since the driver loaded.
    pub const ECC_DBE: &str = "ecc_dbe";
    /// The last snapshot failed.
    pub const SNAPSHOT_FAILED: &str = "snapshot_failed";
    /// No snapshot for too long.
    pub const SNAPSHOT_STALE: &str = "snapshot_stale";
    /// An agent's clock away from the controller's.
    pub const CLOCK_SKEW: &str = "clock_skew";
    /// A member at their hard quota.
    pub const QUOTA_HARD: &str = "quota_hard";
}

/// The thresholds, in the rules' own units.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// °C.
    pub gpu_temp_c: f64,
    /// °C below which a hot GPU counts as cool again.
    pub gpu_temp_clear_c: f64,
    /// How long a GPU must stay hot, ms.
    pub gpu_temp_for_ms: i64,
    /// How long a node may go unheard, ms.
    pub node_lost_ms: i64,
    /// Percent full.
    pub disk_percent: f64,
    /// How long a snapshot may be missing, ms.
    pub snapshot_max_age_ms: i64,
    /// Seconds of skew.
    pub clock_skew_s: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            gpu_temp_c: 85.0,
            gpu_temp_clear_c: 80.0,
            gpu_temp_for_ms: 2 * 60_000,
            node_lost_ms: 5 * 60_000,
            disk_percent: 90.0,
            snapshot_max_age_ms: 26 * 3_600_000,
            clock_skew_s: 5.0,
        }
    }
}

fn rule(name: &str, fire_at: f64, clear_at: f64, for_ms: i64, severity: Severity) -> Rule {
    Rule {
        name: name.to_string(),
        fire_at,
        clear_at: clear_at.min(fire_at),
        for_ms,
        severity,
    }
}

/// The rule set for these thresholds. Values are chosen so that each rule's observation is
/// simple: a node's silence in seconds, a disk's percent, a 0/1 for yes-or-no conditions.
pub fn standard(t: &Thresholds) -> Vec<Rule> {
    use Severity::{Critical, Warning};
    vec![
        rule(
            names::GPU_TEMPERATURE,
            t.gpu_temp_c,
            t.gpu_temp_clear_c,
            t.gpu_temp_for_ms,
            Critical,
        ),
        rule(
            names::NODE_LOST,
            t.node_lost_ms as f64 / 1000.0,
            t.node_lost_ms as f64 / 1000.0,
            0,
            Critical,
        ),
        rule(
            names::DISK_FULL,
            t.disk_percent,
            t.disk_percent - 5.0,
            0,
            Warning,
        ),
        rule(names::ZOMBIE, 1.0, 1.0, 0, Warning),
        rule(names::ECC_DBE, 1.0, 1.0, 0, Critical),
        rule(names::SNAPSHOT_FAILED, 1.0, 1.0, 0, Critical),
        rule(
            names::SNAPSHOT_STALE,
            t.snapshot_max_age_ms as f64 / 1000.0,
            t.snapshot_max_age_ms as f64 / 1000.0,
            0,
            Warning,
        ),
        rule(
            names::CLOCK_SKEW,
            t.clock_skew_s,
            t.clock_skew_s,
            60_000,
            Warning,
        ),
        rule(names::QUOTA_HARD, 100.0, 100.0, 0, Warning),
    ]
}
