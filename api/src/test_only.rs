//! `POST /v1/jobs/test` (`labpool submit --test-only`): what a submit would make of a job, and
//! where and when it would start, without queueing it.

use serde::{Deserialize, Serialize};

/// A job as the controller would queue it, and its predicted start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WouldStart {
    /// The id it would get (the next one; another submit may take it first).
    pub job_id: u64,
    /// When it would start (RFC 3339): now, or its reservation's start. None when the pass
    /// could not tell (held, waiting on a dependency or a limit).
    pub start_time: Option<String>,
    /// The node it would start on, when known.
    pub node: Option<String>,
    /// Why it would not start at once.
    pub reason: Option<String>,
    /// More on the reason.
    pub reason_detail: Option<String>,
    /// The partition, after admission.
    pub partition: String,
    /// The account, after admission.
    pub account: Option<String>,
    /// Nodes (Slurm's `NumNodes`).
    pub nodes: u32,
    /// Tasks (Slurm's `NumTasks`).
    pub tasks: u32,
    /// CPU cores in all (Slurm's `NumCPUs`).
    pub cpus: u32,
    /// GPUs in all.
    pub gpus: u32,
    /// GPU type, if one was asked for.
    pub gpu_type: Option<String>,
    /// Memory reserved in all, MiB; 0 reserves none.
    pub mem_mib: u64,
    /// Time limit, seconds; None is unlimited.
    pub time_limit_s: Option<u64>,
}
