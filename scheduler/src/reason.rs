//! Why a job is waiting, in Slurm's words with labpool's detail.

use crate::placement::{BUSY_STAGES, Rejections};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The reason word of a job held while its data is copied to the node it will start on (a
/// stage-in): Slurm's own word for a job waiting for its burst buffer's stage-in.
pub const STAGE_IN: &str = "BurstBufferStageIn";

/// A pending reason: Slurm's code and a sentence behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingReason {
    /// Slurm's reason word, such as `Resources` or `Priority`.
    pub code: String,
    /// What lies behind it, such as `0/1 nodes fit: 1 gpus-free`.
    pub detail: String,
}

impl PendingReason {
    /// A reason from its parts.
    pub fn new(code: &str, detail: impl Into<String>) -> PendingReason {
        PendingReason {
            code: code.to_string(),
            detail: detail.into(),
        }
    }

    /// The reason for a job no node could take in this pass. `holders` are the reservations
    /// (node, job) that kept it from nodes where it would otherwise fit.
    pub fn from_rejections(r: &Rejections, holders: &[(String, u64)]) -> PendingReason {
        let busy: usize = BUSY_STAGES.iter().map(|s| r.count(s)).sum();
        let code = if busy > 0 {
            "Resources"
        } else if r.count("reserved") > 0 {
            "Priority"
        } else if r.count("cache-room") > 0 {
            "CacheFull"
        } else if r.count("node-up") > 0 {
            "ReqNodeNotAvail"
        } else {
            "BadConstraints"
        };
        let mut detail = r.summary();
        if code == "CacheFull" {
            detail.push_str(
                "; the dataset cache cannot take this job's data without removing versions that running or coming jobs read: it starts when they end (or raise capacity under [cache])",
            );
        }
        if code == "Priority" && !holders.is_empty() {
            let held: Vec<String> = holders
                .iter()
                .map(|(n, j)| format!("{n} for job {j}"))
                .collect();
            detail.push_str(&format!(
                "; held for higher-priority jobs: {}",
                held.join(", ")
            ));
        }
        PendingReason::new(code, detail)
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            f.write_str(&self.code)
        } else {
            write!(f, "{} ({})", self.code, self.detail)
        }
    }
}
