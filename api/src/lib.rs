//! The wire types, in one place for both sides: the controller's HTTP API over its Unix
//! socket (jobs, accounts and nodes here; datasets, environments, quotas and snapshots in their
//! modules), and the protocol between the controller and its node agents ([`agent`]). Paths and
//! JSON bodies are shared by the server and the client. Field names are snake_case; times are
//! RFC 3339.

pub mod accounts;
pub mod agent;
pub mod alerts;
pub mod cells;
pub mod changes;
pub mod data;
pub mod envs;
pub mod gang;
pub mod models;
pub mod nodes;
mod plain_submit;
pub mod quotas;
pub mod reports;
pub mod reservations;
pub mod session_script;
pub mod sessions;
pub mod snapshots;
pub mod state;
pub mod steps;
pub mod test_only;
pub mod versions;
pub mod web;

pub use accounts::{
    AccountChange, AccountView, AccountsView, CreditsView, GrantRequest, LedgerLine,
};
pub use changes::{HoldRequest, SignalRequest, SignalTarget, UpdateRequest};
pub use models::ModelUse;
pub use nodes::{DrainRequest, GpuView, NodeView, PartitionView};

use labpool_scheduler::{JobState, TimeLimit};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// API version prefix.
pub const PREFIX: &str = "/v1";

/// Largest request body the API takes (the signed agent paths have limits of their own).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The longest timeout a job may give its login shell (`--get-user-env=SECS`): 1 to 600 s.
pub const MAX_LOGIN_TIMEOUT_S: u32 = 600;

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
    /// Account to run under; the user's default account when absent.
    #[serde(default)]
    pub account: Option<String>,
    /// Spend an emergency token: the job goes first in line.
    #[serde(default)]
    pub emergency: bool,
    /// It may be preempted (`--preemptible`), and is charged at the preemptible rate.
    #[serde(default)]
    pub preemptible: bool,
    /// An interactive session (`labpool run --pty`, `salloc`): never preempted.
    #[serde(default)]
    pub interactive: bool,
    /// The reservation to run in (`--reservation`).
    #[serde(default)]
    pub reservation: Option<String>,
    /// Datasets the job reads.
    #[serde(default)]
    pub datasets: Vec<String>,
    /// Dependencies, as Slurm writes them: `afterok:12:13,afterany:9`.
    #[serde(default)]
    pub dependency: Option<String>,
    /// An array, as Slurm writes it: `0-9%2`.
    #[serde(default)]
    pub array: Option<String>,
    /// The software environment to run inside, by name.
    #[serde(default)]
    pub env: Option<String>,
    /// Filled in by the controller: the id `env` named at submit time (names can move).
    #[serde(default)]
    pub env_id: Option<String>,
    /// Filled in by the controller: the environment's kind.
    #[serde(default)]
    pub env_kind: Option<labpool_envs::EnvKind>,
    /// Models the job reads (`--model ORG/NAME`), staged on its node like datasets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// Filled in by the controller: the dataset each model is staged as.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_uses: Vec<ModelUse>,
    /// Share each GPU with other sharing jobs, up to the GPU's `share`.
    #[serde(default)]
    pub gpu_share: bool,
    /// Part of one card, with that part's memory (`--gres=gpu:TYPE.D:1`, `--gres=shard:N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<labpool_scheduler::slice::Slice>,
    /// End NODE_FAIL instead of being requeued when its node fails.
    #[serde(default)]
    pub no_requeue: bool,
    /// The client's name for this submit (up to 128 printable characters): a retry with the
    /// same key gets the first answer back instead of queueing the job again.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// The script was made from `--wrap` (its messages then quote the command, not a line).
    #[serde(default)]
    pub wrapped: bool,
    /// A signal to send before the time limit (`--signal`).
    #[serde(default)]
    pub signal: Option<labpool_scheduler::options::SignalSpec>,
    /// `--get-user-env`: the login environment under the submitted one; seconds for the
    /// login shell.
    #[serde(default)]
    pub get_user_env: Option<u32>,
    /// Append to the output files rather than truncate them (`--open-mode=append`).
    #[serde(default)]
    pub open_append: bool,
    /// Which nodes it may run on (`--constraint`, `--nodelist`, `--exclude`).
    #[serde(default)]
    pub nodes: labpool_scheduler::NodeRequest,
    /// Submitted held by its owner (`--hold`): it waits until released.
    #[serde(default)]
    pub hold: bool,
    /// The moments its member is told about (`--mail-type`).
    #[serde(default)]
    pub mail_types: std::collections::BTreeSet<labpool_scheduler::options::MailType>,
    /// Who is told (`--mail-user`) [default: the member].
    #[serde(default)]
    pub mail_user: Option<String>,
    /// Not to start before this time, ms since the epoch (`--begin`, read by the client).
    #[serde(default)]
    pub begin_ms: Option<i64>,
    /// To end by this time, ms since the epoch (`--deadline`, read by the client).
    #[serde(default)]
    pub deadline_ms: Option<i64>,
    /// A note kept with the job (`--comment`), shown by `show`.
    #[serde(default)]
    pub comment: Option<String>,
    /// Tasks in all (`--ntasks`): what `srun` starts, and Slurm's `NumTasks`.
    #[serde(default = "one")]
    pub ntasks: u32,
    /// Nodes (`--nodes`); `gpus`, `cpus` and `mem_mib` are each node's.
    #[serde(default = "one")]
    pub node_count: u32,
    /// `--gpus-per-task`'s count, for `srun`'s binding.
    #[serde(default)]
    pub gpus_per_task: Option<u32>,
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
    /// The new job's id (for an array, its first task's, which is the array's id).
    pub job_id: u64,
    /// Every job made: one, or one per array task.
    pub job_ids: Vec<u64>,
    /// The account it runs under.
    pub account: Option<String>,
    /// Its partition.
    pub partition: String,
    /// Its time limit.
    pub time_limit: TimeLimit,
    /// Warnings for the submitter (quota near its limit).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// One event in a job's life.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobEvent {
    /// When.
    pub time: String,
    /// What: submit, start, end, cancel, requeue…
    pub event: String,
    /// More.
    pub detail: Option<String>,
}

/// `GET /v1/jobs/{id}`: the job and its events.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobDetail {
    /// The job.
    #[serde(flatten)]
    pub job: JobView,
    /// Its life so far.
    pub events: Vec<JobEvent>,
    /// Its `srun` steps, attempt by attempt.
    #[serde(default)]
    pub steps: Vec<steps::StepView>,
    /// A smaller slice that its runs' GPU memory would have fitted, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
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
    /// A multi-node job's other nodes, with the GPUs it holds on each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<labpool_scheduler::NodeShare>,
    /// The ports leased to it while it runs (`MASTER_PORT` is the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<labpool_scheduler::PortBlock>,
    /// Nodes asked for (`--nodes`); `gpus_requested`, `cpus` and `mem_mib` are each node's.
    #[serde(default = "one")]
    pub node_count: u32,
    /// Tasks in all (`--ntasks`).
    #[serde(default = "one")]
    pub ntasks: u32,
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
    /// Not to start before this time (`--begin`).
    #[serde(default)]
    pub begin_time: Option<String>,
    /// Its `--comment`.
    #[serde(default)]
    pub comment: Option<String>,
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
    /// Account.
    pub account: Option<String>,
    /// Submitted through the emergency lane.
    pub emergency: bool,
    /// Datasets it reads.
    pub datasets: Vec<String>,
    /// Its dependencies, Slurm style.
    pub dependency: Option<String>,
    /// The array it belongs to.
    pub array_id: Option<u64>,
    /// Its task index in that array.
    pub array_task: Option<u32>,
    /// The software environment it asked for, by name.
    #[serde(default)]
    pub env: Option<String>,
    /// The environment's id it runs (or ran) with.
    #[serde(default)]
    pub env_id: Option<String>,
    /// It shares its GPUs with other sharing jobs.
    #[serde(default)]
    pub gpu_share: bool,
    /// The slice of one card it asked for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<labpool_scheduler::slice::Slice>,
    /// The isolation in force for its run.
    #[serde(default)]
    pub isolation: Option<String>,
    /// What its latest attempt used of its GPUs, where NVML sampled them.
    #[serde(default)]
    pub gpu_usage: Option<crate::alerts::GpuUsageView>,
    /// Who asked for it to be cancelled (a user name), as `sacct` says `CANCELLED by UID`.
    #[serde(default)]
    pub cancelled_by: Option<String>,
}

impl JobView {
    /// How Slurm shows a job id: `12`, or `10_2` for task 2 of array 10.
    pub fn display_id(&self) -> String {
        match (self.array_id, self.array_task) {
            (Some(a), Some(t)) => format!("{a}_{t}"),
            _ => self.id.to_string(),
        }
    }
}

/// `labpool why N`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WhyView {
    /// The job.
    pub id: u64,
    /// Its state.
    pub state: JobState,
    /// For waiting jobs, the last pass's view of it.
    pub note: Option<labpool_scheduler::scheduler::JobNote>,
    /// The limits it is held to, Slurm spelling.
    pub limits: Vec<String>,
    /// The placement chain: filter names, then scorer names.
    pub filters: Vec<String>,
    /// Scorers, in order.
    pub scorers: Vec<String>,
    /// In words, when there is no note (running or ended jobs).
    pub summary: String,
    /// What the member should know besides: datasets it streams from the shared storage.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// For a waiting job, the nodes that take no new job and why: `gpu2 (not responding: …)`.
    #[serde(default)]
    pub nodes_off: Vec<String>,
    /// A smaller slice that the job's earlier runs' GPU memory would have fitted, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
}

/// `POST /v1/jobs/cancel`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Jobs to cancel: `12` (a job, or every task of array 12) or `12_3` (one task).
    pub ids: Vec<String>,
}

/// What became of one job in a cancel, hold or release.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CancelOutcome {
    /// The job, as it was named.
    pub id: String,
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

/// `GET /v1/jobs` filters.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsQuery {
    /// Only this user's jobs.
    pub user: Option<String>,
}

/// `GET /v1/history` filters.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// Only this user's jobs.
    pub user: Option<String>,
    /// Only jobs that ended at or after this time, ms since the epoch.
    pub since_ms: Option<i64>,
    /// At most this many in this page [default and most: [`HISTORY_PAGE`]].
    pub limit: Option<u32>,
    /// The page after the one that answered with this `next`.
    pub after: Option<String>,
    /// Only these jobs, comma-separated ids (an array's id: all its tasks), at most
    /// [`HISTORY_IDS`]; `sacct -j` asks for the jobs in flight this way.
    pub ids: Option<String>,
}

/// `GET /v1/steps?ids=12,13`: the `srun` steps of each job named (at most [`HISTORY_IDS`]),
/// for `sacct` of many jobs in one question.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepsQuery {
    /// Comma-separated job ids.
    pub ids: String,
}

/// The most job ids one `GET /v1/history?ids=` names.
pub const HISTORY_IDS: usize = 1000;

/// The most finished jobs one `GET /v1/history` answers with: a longer history comes in
/// pages, each naming the next, so no answer grows with the whole history.
pub const HISTORY_PAGE: u32 = 1000;

/// `GET /v1/history`: finished jobs, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistoryPage {
    /// This page's jobs.
    pub jobs: Vec<JobView>,
    /// Where the next page starts (`after=`), when there may be one.
    pub next: Option<String>,
}

/// `GET /v1/credits` filters.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditsQuery {
    /// Whose credits [default: the caller's].
    pub user: Option<String>,
}
