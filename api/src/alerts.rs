//! `GET /v1/alerts`: what the alert engine holds.

use labpool_monitor::alerts::Alert;
use serde::{Deserialize, Serialize};

/// The alerts a caller may see.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AlertsView {
    /// Firing now.
    pub firing: Vec<Alert>,
    /// Condition holds, "for" not yet passed.
    pub pending: Vec<Alert>,
    /// Resolved lately, oldest first.
    pub resolved: Vec<Alert>,
}

/// What a job's latest attempt used of its GPUs, from the agents' samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuUsageView {
    /// Mean GPU utilisation, percent.
    pub util_mean: f64,
    /// Peak GPU utilisation, percent.
    pub util_peak: f64,
    /// Peak GPU memory, MiB.
    pub mem_peak_mib: u64,
    /// Energy, kWh.
    pub energy_kwh: f64,
    /// Samples it was summed from.
    pub samples: u64,
}

impl From<&labpool_monitor::usage::JobUsage> for GpuUsageView {
    fn from(u: &labpool_monitor::usage::JobUsage) -> Self {
        GpuUsageView {
            util_mean: (u.util_mean() * 10.0).round() / 10.0,
            util_peak: u.util_peak,
            mem_peak_mib: u.mem_peak_mib,
            energy_kwh: u.energy_kwh(),
            samples: u.samples,
        }
    }
}

/// `GET /v1/doctor` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DoctorQuery {
    /// Name jobs waiting longer than this many hours [default: 24].
    pub waiting_hours: Option<f64>,
    /// Name jobs running longer than this many days [default: 7].
    pub running_days: Option<f64>,
}

/// The doctor's findings, in the checklist's order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DoctorReport {
    /// Findings.
    pub findings: Vec<labpool_monitor::doctor::Finding>,
}
