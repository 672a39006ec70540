//! Changes to jobs already queued: hold or release (`POST /v1/jobs/hold`) and update
//! (`POST /v1/jobs/update`).

use serde::{Deserialize, Serialize};

/// `POST /v1/jobs/hold`: hold or release waiting jobs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldRequest {
    /// Jobs: `12` (a job, or every task of array 12) or `12_3` (one task).
    pub ids: Vec<String>,
    /// Hold them (true) or release them (false).
    pub hold: bool,
}

/// `POST /v1/jobs/update`: new values for a waiting job; what is not given stays.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    /// The job.
    pub id: u64,
    /// A new time limit, in any of Slurm's forms.
    #[serde(default)]
    pub time_limit: Option<String>,
    /// A new partition.
    #[serde(default)]
    pub partition: Option<String>,
    /// New dependencies (`afterok:12`, `singleton`; empty for none).
    #[serde(default)]
    pub dependency: Option<String>,
    /// A node count (only 1 is accepted).
    #[serde(default)]
    pub nodes: Option<String>,
}

/// Which of a running job's processes a signal goes to (scancel's `-b` and `-f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalTarget {
    /// Every process of the job but the batch shell: its steps (scancel's default).
    Steps,
    /// The batch shell alone (`-b`).
    Batch,
    /// Every process of the job (`-f`).
    All,
}

/// `POST /v1/jobs/signal`: send a signal to running jobs, which go on running.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// Jobs: `12` (a job, or every task of array 12) or `12_3`.
    pub ids: Vec<String>,
    /// The signal's number.
    pub signal: i32,
    /// Which processes.
    pub target: SignalTarget,
}
