//! What the controller and a node agent say to each other. The in-process agent of the
//! embedded default receives these over a channel; a remote agent will receive the same
//! messages over the network, so one code path serves one box and many.

use labpool_cache::store::{Inventory, Progress, StageReport, VerifyReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Everything a node needs to start one attempt of a job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    /// Job id.
    pub job: u64,
    /// Attempt number, starting at 1; a requeued job runs again with the next one.
    pub attempt: u32,
    /// Job name.
    pub name: String,
    /// Owner.
    pub user: String,
    /// Owner's uid.
    pub uid: u32,
    /// Owner's primary gid.
    pub gid: u32,
    /// Partition.
    pub partition: String,
    /// Script text.
    pub script: String,
    /// Script arguments.
    pub args: Vec<String>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Standard output file.
    pub stdout: PathBuf,
    /// Standard error file.
    pub stderr: PathBuf,
    /// The submit environment, filtered by `--export`.
    pub environment: BTreeMap<String, String>,
    /// GPU indexes allocated.
    pub gpus: Vec<u32>,
    /// Cores allocated.
    pub cpus: u32,
    /// Memory allocated, MiB (0: none reserved).
    pub mem_mib: u64,
    /// Time limit, seconds.
    pub time_limit_s: Option<u64>,
    /// Milliseconds between TERM and KILL.
    pub kill_grace_ms: u64,
    /// Submitter's umask.
    pub umask: u32,
    /// Account.
    pub account: Option<String>,
    /// Its place in an array.
    pub array: Option<ArrayEnv>,
    /// Its datasets, staged complete on the node.
    pub datasets: Vec<LaunchDataset>,
    /// The software environment it runs inside, staged on the node.
    #[serde(default)]
    pub env: Option<LaunchEnv>,
    /// Its models, each staged as one of `datasets`: the node gives the job a hub cache that
    /// links them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<crate::ModelUse>,
    /// GPU hygiene variables, set unless the job's own environment sets them.
    #[serde(default)]
    pub gpu_env: BTreeMap<String, String>,
    /// The GPU memory, MiB, that the job's processes may hold together on its card, when it
    /// holds a slice of it: the agent preloads the slice library with this limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_mib: Option<u64>,
    /// The shards the job asked for (`--gres=shard:N`), which `SLURM_SHARDS_ON_NODE` tells it as
    /// Slurm does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
    /// A signal to send before the time limit (`--signal`).
    #[serde(default)]
    pub signal: Option<labpool_scheduler::options::SignalSpec>,
    /// Append to the output files rather than truncate them (`--open-mode=append`).
    #[serde(default)]
    pub open_append: bool,
    /// Tasks (`--ntasks`): what `srun` starts by default.
    #[serde(default = "one")]
    pub ntasks: u32,
    /// `--gpus-per-task`: what `srun` gives each task by default.
    #[serde(default)]
    pub gpus_per_task: Option<u32>,
    /// `--get-user-env`: seconds for the login shell whose environment the job starts from.
    #[serde(default)]
    pub get_user_env: Option<u32>,
    /// The ports leased to the job on its nodes: `MASTER_PORT` is the first.
    #[serde(default)]
    pub ports: Option<labpool_scheduler::PortBlock>,
    /// The job's nodes when it has several (a gang), and which of them this order is for.
    #[serde(default)]
    pub gang: Option<crate::gang::Gang>,
    /// The address other machines reach the job's node at (its agent's host): where the job's
    /// own listeners (a session's port) bind. `None` on a node with no agent of its own, whose
    /// sessions are joined on the machine itself.
    #[serde(default)]
    pub node_host: Option<String>,
}

fn one() -> u32 {
    1
}

/// A software environment as a node gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchEnv {
    /// The name the job asked for.
    pub name: String,
    /// Its id (the hash of kind, lock and platform).
    pub id: String,
    /// Its kind.
    pub kind: labpool_envs::EnvKind,
    /// Where it lives on every node (its fixed path).
    pub dir: PathBuf,
    /// The packed build, to unpack where `dir` is missing.
    pub archive: PathBuf,
}

/// A dataset as a job gets it: the version it was given and where that is on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchDataset {
    /// Registered name.
    pub name: String,
    /// Version (manifest hash).
    pub version: String,
    /// True when the version was staged before this job was placed (a cache hit).
    pub hit: bool,
    /// The shared source the job reads directly, for a dataset larger than every node's
    /// cache (streamed, not staged).
    #[serde(default)]
    pub stream: Option<std::path::PathBuf>,
}

impl Launch {
    /// The datasets staged in this node's cache (not streamed from the shared source).
    pub fn staged(&self) -> impl Iterator<Item = &LaunchDataset> {
        self.datasets.iter().filter(|d| d.stream.is_none())
    }
}

/// One dataset version to stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageItem {
    /// Registered name.
    pub name: String,
    /// Version (manifest hash).
    pub version: String,
    /// The registered source directory.
    pub source: PathBuf,
    /// The version's manifest file, as the controller recorded it.
    pub manifest: PathBuf,
    /// Nodes that hold the version complete, best first: it may come from them instead of the
    /// shared source (which stays the fallback).
    #[serde(default)]
    pub peers: Vec<PeerRef>,
}

/// Who a stage is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum StageFor {
    /// A placed job's attempt, which starts when its versions are complete.
    Job {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
    },
    /// A queued job predicted to start here (prefetch).
    Prefetch {
        /// Job.
        job: u64,
    },
    /// An admin's warm-up (`labpool cache stage`).
    WarmUp,
    /// A queued job that takes its GPUs here once this is in place (a stage-in): it waits for
    /// this copy, so it goes before prefetches and warm-ups.
    StageIn {
        /// Job.
        job: u64,
    },
}

/// Stage versions into the node cache, removing unpinned versions first where room is short.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageOrder {
    /// Who waits for it.
    pub purpose: StageFor,
    /// What to stage.
    pub items: Vec<StageItem>,
    /// Versions that must not be removed to make room (needed by running or coming jobs).
    pub pinned: Vec<(String, String)>,
    /// Queue position of each version's next known use; the furthest goes first.
    pub next_use: Vec<((String, String), usize)>,
}

/// How a stage went, per version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// What was copied, linked and resumed.
    pub report: StageReport,
}

/// Why a stage failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StageFailure {
    /// The cache cannot make room without removing pinned versions: the job should wait.
    NoRoom(String),
    /// Anything else (source gone or changed, disk error): the job cannot run as placed.
    Failed(String),
}

/// What an array task's environment says about its array.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArrayEnv {
    /// The array's id.
    pub array_id: u64,
    /// This task's index.
    pub task: u32,
    /// Tasks in the array.
    pub count: u32,
    /// Lowest task index.
    pub min: u32,
    /// Highest task index.
    pub max: u32,
}

/// An order from the controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AgentOrder {
    /// Start this attempt.
    Start(Box<Launch>),
    /// Stop this attempt (cancel).
    Kill {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
    },
    /// Preempt this running attempt: its `--signal` (TERM when it asked for none) and the
    /// notice file now, then the stop (as for a cancel) when `grace_ms` has passed.
    Notice {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// The job that takes its GPUs.
        by: u64,
        /// The job's `--signal`, whose signal and target the notice uses.
        signal: Option<labpool_scheduler::options::SignalSpec>,
        /// Time between the notice and the stop.
        grace_ms: u64,
    },
    /// Send a signal to this running attempt's processes (`scancel --signal`).
    Signal {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// The signal's number.
        signal: i32,
        /// Which processes.
        target: crate::SignalTarget,
    },
    /// Checkpoint this running attempt's GPU state to host memory and keep its processes from
    /// opening its GPUs, which go back to the pool (an idle session).
    Suspend {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// The GPUs it gives back.
        gpus: Vec<u32>,
    },
    /// Let this suspended attempt open its GPUs again and restore its GPU state on them.
    Resume {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// Its GPUs (the ones it gave back).
        gpus: Vec<u32>,
    },
    /// After a controller restart: these attempts should be running here. Report each, and
    /// stop any other that is.
    Adopt {
        /// (job, attempt) pairs.
        expected: Vec<(u64, u32)>,
    },
    /// Stage dataset versions.
    Stage(Box<StageOrder>),
    /// Re-hash every complete version; re-stage what does not match.
    Verify {
        /// The controller's id for the answer.
        request: u64,
        /// Sources of the versions, to re-stage mismatched files from: (name, version) → dir.
        sources: Vec<((String, String), PathBuf)>,
    },
    /// Send the cache's inventory.
    Inventory,
    /// `job` was placed on another node: drop its prefetches still queued here.
    DropPrefetch {
        /// The job.
        job: u64,
    },
    /// Make sure this environment is on the node (unpack it where it is not).
    StageEnv {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// What to stage.
        env: LaunchEnv,
    },
    /// The controller has recorded this attempt's end; its files may go.
    Forget {
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
    },
}

/// How an attempt ended, as its shim recorded it: the lifecycle core's own type.
pub use labpool_lifecycle::Outcome;

/// A report from an agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AgentReport {
    /// An attempt ended.
    Ended {
        /// Node.
        node: String,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// How.
        outcome: Outcome,
        /// The `srun` steps it ran.
        #[serde(default)]
        steps: Vec<crate::steps::StepRecord>,
    },
    /// The `srun` steps of a running attempt changed (one started or ended): all of them so far.
    Steps {
        /// Node.
        node: String,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// Its steps, running ones with `end_ms` 0.
        steps: Vec<crate::steps::StepRecord>,
    },
    /// The attempt began to run at `since_ms` (the Slurm executor reports Slurm's start time).
    Running {
        /// Node.
        node: String,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// When it began, ms.
        since_ms: i64,
    },
    /// A suspend (`resumed` false) or a resume of an attempt was carried out, or failed with
    /// the words given.
    Checkpoint {
        /// Node.
        node: String,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// A resume, not a suspend.
        resumed: bool,
        /// What failed, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<String>,
    },
    /// After a restart: this attempt is still running and is watched again.
    Adopted {
        /// Node.
        node: String,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
    },
    /// After a restart: this attempt never started, and now never will (it is fenced).
    NeverStarted {
        /// Node.
        node: String,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// Why, when it is not a start order lost with a restart (Slurm did not start it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// A stage made progress (sent a few times a second at most).
    Staging {
        /// Node.
        node: String,
        /// Who it is for.
        purpose: StageFor,
        /// Dataset.
        name: String,
        /// Version.
        version: String,
        /// Files and bytes so far.
        progress: Progress,
    },
    /// A stage ended.
    Staged {
        /// Node.
        node: String,
        /// Who it was for.
        purpose: StageFor,
        /// The versions it was for.
        versions: Vec<(String, String)>,
        /// Each version's report, or why it failed.
        result: Result<Vec<Staged>, StageFailure>,
    },
    /// The node cache's contents and capacity, after every change.
    Inventory {
        /// Node.
        node: String,
        /// Capacity, bytes.
        capacity: u64,
        /// Versions and bytes used.
        inventory: Inventory,
    },
    /// An environment is on the node (or could not be put there).
    EnvStaged {
        /// Node.
        node: String,
        /// Job.
        job: u64,
        /// Attempt.
        attempt: u32,
        /// Environment id.
        id: String,
        /// True when it was unpacked now, false when it was there; or why it failed.
        result: Result<bool, String>,
    },
    /// A verify ended.
    Verified {
        /// Node.
        node: String,
        /// The controller's id for it.
        request: u64,
        /// Per version: name, version and report; or why it could not run.
        result: Result<Vec<(String, String, VerifyReport)>, String>,
    },
}

impl AgentReport {
    /// The node the report speaks for.
    pub fn node(&self) -> &str {
        match self {
            AgentReport::Ended { node, .. }
            | AgentReport::Steps { node, .. }
            | AgentReport::Adopted { node, .. }
            | AgentReport::Running { node, .. }
            | AgentReport::NeverStarted { node, .. }
            | AgentReport::Staging { node, .. }
            | AgentReport::Staged { node, .. }
            | AgentReport::Inventory { node, .. }
            | AgentReport::EnvStaged { node, .. }
            | AgentReport::Verified { node, .. }
            | AgentReport::Checkpoint { node, .. } => node,
        }
    }
}

/// An agent introducing itself to the controller: at start, and again whenever the controller
/// does not know it (after a restart of either, or after the node was declared DOWN).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registration {
    /// Name, GPUs, cores and memory.
    pub node: labpool_scheduler::node::NodeSpec,
    /// Where its GPUs come from: nvml, virtual or none.
    pub gpu_source: String,
    /// The cgroup isolation it offers.
    pub isolation: labpool_isolation::Support,
    /// The port it takes orders and peers' requests on.
    pub port: u16,
    /// The address others reach it at, when its config names one.
    pub advertise: Option<String>,
    /// Random per agent process: reports from another process of the same node are told apart.
    pub instance: String,
    /// labpool's version on the node.
    pub version: String,
    /// Its dataset cache's root: over the Slurm executor the controller tells jobs their paths.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Time between its heartbeats, ms: three missed and the node is shown not responding.
    #[serde(default)]
    pub heartbeat_ms: Option<u64>,
    /// How it checkpoints a job's GPU state (`cuda-checkpoint` and the driver's version), when
    /// it can: idle single-GPU sessions are then suspended rather than stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

/// The controller's answer to a registration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registered {
    /// The id of the order link the controller opened to this agent: orders from any other
    /// (an older link, still retrying) are refused, so an order sent before the node was
    /// declared DOWN never lands after the fence.
    pub link: u64,
    /// The address the controller will send orders to.
    pub address: String,
    /// How long the controller waits for a heartbeat before the node goes DOWN, ms.
    pub node_timeout_ms: u64,
}

/// A heartbeat.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Node.
    pub node: String,
    /// The agent process.
    pub instance: String,
    /// Jobs running under this agent's shims.
    pub running: u32,
    /// 1-minute load average.
    pub load: f64,
    /// Memory available, MiB.
    pub mem_available_mib: u64,
    /// The agent's clock when it sent this, ms: the controller measures the skew from it.
    #[serde(default)]
    pub sent_ms: Option<i64>,
    /// GPU readings taken since the last heartbeat that got through, oldest first.
    #[serde(default)]
    pub samples: Vec<labpool_monitor::sample::NodeSample>,
}

/// Orders for one node, in the order they were given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrderBatch {
    /// The link they came on (see [`Registered::link`]).
    pub link: u64,
    /// Position on that link, from 1: a batch retried after a lost answer is applied once.
    pub seq: u64,
    /// The orders.
    pub orders: Vec<AgentOrder>,
}

/// Reports from one node, in the order they happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportBatch {
    /// Node.
    pub node: String,
    /// The agent process.
    pub instance: String,
    /// Position in this process's reports, from 1: a retried batch is handled once.
    pub seq: u64,
    /// The reports.
    pub reports: Vec<AgentReport>,
}

/// A file of a node's snapshot copy (`/v1/agent/copy/file?key=…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyKey {
    /// `config.json`, `packs/XY/…` or `snapshots/….json`.
    pub key: String,
}

/// What a peer request names: a dataset version, and one of its files (`/v1/peer/*?QUERY`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerQuery {
    /// Dataset.
    pub name: String,
    /// Version.
    pub version: String,
    /// File, relative to the version's root (not for the manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A node that holds a dataset version another node needs: it may be staged from there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerRef {
    /// Its name.
    pub node: String,
    /// Its agent's address.
    pub address: String,
}
