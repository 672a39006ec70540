//! Nodes, their GPUs and partitions as `labpool nodes`, `sinfo` and the dashboard show them,
//! and the request that drains a node.

use labpool_scheduler::node::NodeState;
use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
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
    /// Job holding it (the first, when it is shared).
    pub job: Option<u64>,
    /// Every job holding it: one, or up to `share` sharing jobs.
    #[serde(default)]
    pub jobs: Vec<u64>,
    /// How many `--gpu-share` jobs may hold it at once (1: not shared).
    #[serde(default = "one")]
    pub share: u32,
    /// Its latest utilisation, percent, where NVML samples it.
    #[serde(default)]
    pub util_percent: Option<u32>,
    /// Its latest temperature, degrees C, where NVML samples it.
    #[serde(default)]
    pub temperature_c: Option<u32>,
}

/// `POST /v1/nodes/drain`: drain a node, or resume it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrainRequest {
    /// The node.
    pub node: String,
    /// Why it drains; `None` resumes it.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A node, as `labpool nodes` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// State.
    pub state: NodeState,
    /// False while its agent is not responding (missed heartbeats, or orders that cannot be
    /// delivered): nothing new is placed there. Shown as `IDLE*`, as Slurm does.
    #[serde(default = "yes")]
    pub responding: bool,
    /// Why it is down, not responding or draining.
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
    /// The job isolation it offers.
    #[serde(default)]
    pub isolation: String,
    /// Its agent's address, when the node is served by `labpool agent`.
    #[serde(default)]
    pub agent: Option<String>,
    /// The labpool version its agent runs: the controller's own for its in-process node;
    /// `None` for a remote node whose agent has not registered since the controller started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// When its agent was last heard from (RFC 3339).
    #[serde(default)]
    pub last_seen: Option<String>,
    /// Its 1-minute load average, from the last heartbeat.
    #[serde(default)]
    pub load: Option<f64>,
    /// Memory available on it, MiB, from the last heartbeat.
    #[serde(default)]
    pub mem_available_mib: Option<u64>,
    /// Its features, for `--constraint`.
    #[serde(default)]
    pub features: Vec<String>,
}

fn yes() -> bool {
    true
}

impl NodeView {
    /// The state as `labpool nodes` prints it: `IDLE`, or `IDLE*` while not responding.
    pub fn state_text(&self) -> String {
        let star = if self.responding { "" } else { "*" };
        format!("{}{star}", self.state.as_str())
    }
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
    /// Accounts allowed; `None` means everyone.
    pub allow_accounts: Option<Vec<String>>,
    /// Most GPUs per job.
    pub max_gpus_per_job: Option<u32>,
}
