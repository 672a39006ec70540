//! The controller's HTTP API over its Unix socket: paths and JSON bodies, shared by the server
//! and the client. Field names are snake_case; times are RFC 3339.

use labpool_scheduler::node::NodeState;
use labpool_scheduler::{JobState, TimeLimit};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// API version prefix.
pub const PREFIX: &str = "/v1";

/// `POST /v1/jobs`: a job to queue. The submitter's identity comes from the socket, never from
/// the body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// Job name.
    pub name: String,
    /// The script's full text, starting with `#!`; it is kept, so later edits do not matter.
    pub script: String,
    /// Arguments for the script.
    #[serde(default)]
    pub args: Vec<String>,
    /// Absolute working directory.
    pub workdir: PathBuf,
    /// Standard output pattern (`%j`, `%x`, `%u`, `%N`), relative to `workdir`.
    #[serde(default)]
    pub output: Option<String>,
    /// Standard error pattern; with standard output when absent.
    #[serde(default)]
    pub error: Option<String>,
    /// GPUs.
    #[serde(default)]
    pub gpus: u32,
    /// GPU type, lower case.
    #[serde(default)]
    pub gpu_type: Option<String>,
    /// Cores.
    #[serde(default = "one")]
    pub cpus: u32,
    /// Memory, MiB; 0 reserves none.
    #[serde(default)]
    pub mem_mib: u64,
    /// Time limit; the partition's default when absent.
    #[serde(default)]
    pub time_limit: Option<TimeLimit>,
    /// Partition; the default one when absent.
    #[serde(default)]
    pub partition: Option<String>,
    /// Environment for the job, already filtered by `--export`.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// The submitter's umask.
    #[serde(default = "default_umask")]
    pub umask: u32,
}

fn one() -> u32 {
    1
}

fn default_umask() -> u32 {
    0o022
}

/// Answer to a submit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Submitted {
    /// The new job's id.
    pub job_id: u64,
    /// Its partition.
    pub partition: String,
    /// Its time limit.
    pub time_limit: TimeLimit,
}

/// A job, as listings and `show` print it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobView {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Owner.
    pub user: String,
    /// Owner's uid.
    pub uid: u32,
    /// Partition.
    pub partition: String,
    /// State.
    pub state: JobState,
    /// Slurm's reason word while pending (`Resources`, `Priority`…), or why it ended.
    pub reason: Option<String>,
    /// The detail behind the reason.
    pub reason_detail: Option<String>,
    /// Node it runs or ran on.
    pub node: Option<String>,
    /// GPU indexes it holds or held.
    pub gpus: Vec<u32>,
    /// GPUs asked for.
    pub gpus_requested: u32,
    /// GPU type asked for.
    pub gpu_type: Option<String>,
    /// Cores asked for.
    pub cpus: u32,
    /// Memory asked for, MiB.
    pub mem_mib: u64,
    /// Time limit in seconds; `None` is unlimited.
    pub time_limit_s: Option<u64>,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Submit time.
    pub submit_time: String,
    /// Start time.
    pub start_time: Option<String>,
    /// End time.
    pub end_time: Option<String>,
    /// Seconds run so far, or in all.
    pub elapsed_s: Option<u64>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Standard output file, once known.
    pub stdout: Option<PathBuf>,
    /// Standard error file, once known.
    pub stderr: Option<PathBuf>,
    /// How many times it has been started.
    pub attempt: u32,
}

/// One GPU of a node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpuView {
    /// Index.
    pub index: u32,
    /// Short type.
    pub gpu_type: String,
    /// Product name.
    pub product: String,
    /// Memory, MiB (0 when unknown).
    pub memory_mib: u64,
    /// UUID.
    pub uuid: Option<String>,
    /// Job holding it.
    pub job: Option<u64>,
}

/// A node, as `labpool nodes` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// State.
    pub state: NodeState,
    /// Why it is down or draining.
    pub reason: Option<String>,
    /// Where its GPUs come from: nvml, virtual or none.
    pub gpu_source: String,
    /// GPUs.
    pub gpus: Vec<GpuView>,
    /// GPUs free.
    pub gpus_free: u32,
    /// Cores.
    pub cpus: u32,
    /// Cores held by jobs.
    pub cpus_used: u32,
    /// Memory, MiB.
    pub mem_mib: u64,
    /// Memory held by jobs, MiB.
    pub mem_used_mib: u64,
}

/// A partition, as `labpool partition list` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartitionView {
    /// Name.
    pub name: String,
    /// The default one.
    pub default: bool,
    /// Priority.
    pub priority: u32,
    /// Default time limit, seconds (`None`: unlimited).
    pub default_time_s: Option<u64>,
    /// Maximum time limit, seconds (`None`: unlimited).
    pub max_time_s: Option<u64>,
    /// Node names; empty means every node.
    pub nodes: Vec<String>,
}

/// `POST /v1/jobs/cancel`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Jobs to cancel.
    pub ids: Vec<u64>,
}

/// What became of one job in a cancel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CancelOutcome {
    /// The job.
    pub id: u64,
    /// True when it was cancelled or is being stopped.
    pub ok: bool,
    /// What happened, or why not.
    pub message: String,
}

/// `GET /v1/ping`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ping {
    /// labpool's version.
    pub version: String,
    /// The controller's process id.
    pub pid: u32,
    /// The caller, as the controller sees it.
    pub you: String,
    /// True when the caller is an admin.
    pub admin: bool,
}

/// Every error body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What happened.
    pub error: String,
    /// What to do next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Converts a time limit to seconds, `None` for unlimited.
pub fn limit_secs(t: TimeLimit) -> Option<u64> {
    match t {
        TimeLimit::Unlimited => None,
        TimeLimit::Seconds(s) => Some(s),
    }
}
