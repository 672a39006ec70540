//! The job model: identity, state, and what a job asks for.

use crate::dependency::Dependency;
use crate::time::{TimeLimit, Timestamp};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A job's number, unique in a pool and never reused.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A job's state, in Slurm's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    /// Waiting to be placed.
    Pending,
    /// Placed; its inputs are being prepared on the node.
    Staging,
    /// Running on its node.
    Running,
    /// Ended with exit code 0.
    Completed,
    /// Ended with a non-zero exit code or a signal.
    Failed,
    /// Cancelled by its owner or an admin.
    Cancelled,
    /// Killed at its time limit.
    Timeout,
    /// Lost with its node.
    NodeFail,
    /// Killed for exceeding its memory limit.
    OutOfMemory,
    /// Left the queue unstarted: it could no longer end before its `--deadline`.
    Deadline,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 10] = [
        JobState::Pending,
        JobState::Staging,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::OutOfMemory,
        JobState::Deadline,
    ];

    /// The Slurm word for this state.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Staging => "STAGING",
            JobState::Running => "RUNNING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Deadline => "DEADLINE",
        }
    }

    /// True once the job has ended for good.
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Staging | JobState::Running
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown state word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state '{0}'")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// The resources a job holds while it runs, on each of its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Resources {
    /// Nodes (`--nodes`); 0 reads as 1. A job on several nodes is a gang: it holds the
    /// resources below on every one of them, and they all start together or not at all.
    #[serde(default = "one")]
    pub nodes: u32,
    /// GPUs.
    pub gpus: u32,
    /// GPU type, lower case; `None` takes any.
    pub gpu_type: Option<String>,
    /// CPU cores.
    pub cpus: u32,
    /// Memory in MiB; 0 reserves none.
    pub mem_mib: u64,
    /// The job shares its GPUs (`--gpu-share`): each of its GPUs is one of the share slots of a
    /// GPU configured with `share` > 1, which up to `share` sharing jobs hold at once (they all
    /// see the same `CUDA_VISIBLE_DEVICES`). It never lands on a GPU with `share` = 1. A job
    /// without it takes its GPUs whole: no other job, sharing or not, holds them meanwhile.
    #[serde(default)]
    pub gpu_share: bool,
    /// The job takes part of one card, with that part's memory (`--gres=gpu:TYPE.D:1`,
    /// `--gres=shard:N`); see [`crate::slice`]. It then holds one GPU as a sharer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<crate::slice::Slice>,
}

fn one() -> u32 {
    1
}

fn one_unit() -> u8 {
    1
}

impl Resources {
    /// How many nodes the job runs on, at least 1.
    pub fn node_count(&self) -> u32 {
        self.nodes.max(1)
    }

    /// GPUs over all of its nodes: what limits and fair-share count.
    pub fn total_gpus(&self) -> u32 {
        self.gpus.saturating_mul(self.node_count())
    }

    /// True when the job holds its GPUs as a sharer (`--gpu-share` or a slice) rather than
    /// whole.
    pub fn shares_gpus(&self) -> bool {
        self.gpus > 0 && (self.gpu_share || self.slice.is_some())
    }
}

/// What the scheduler knows of a job: enough to place it, nothing about how it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobSpec {
    /// The job's id.
    pub id: JobId,
    /// The job's name.
    pub name: String,
    /// The submitting user's name.
    pub user: String,
    /// The account (research group) it runs under, if any.
    pub account: Option<String>,
    /// The partition it was admitted to.
    pub partition: String,
    /// What it needs.
    pub resources: Resources,
    /// Its wall-time limit, after partition defaults.
    pub time_limit: TimeLimit,
    /// When it was submitted.
    pub submit_time: Timestamp,
    /// Submitted through the emergency lane: top priority tier.
    pub emergency: bool,
    /// Datasets it reads, by name.
    pub datasets: Vec<String>,
    /// Jobs it waits for.
    pub dependencies: Vec<Dependency>,
    /// Its place in an array, if it is an array task.
    pub array: Option<ArrayTask>,
    /// Which nodes it may run on.
    #[serde(default)]
    pub nodes: NodeRequest,
    /// Held (`--hold`, `labpool hold`): it waits until released, whatever else it waits for.
    #[serde(default)]
    pub hold: Option<HoldBy>,
    /// It may not start before this time (`--begin`).
    #[serde(default)]
    pub begin: Option<Timestamp>,
    /// It must end by this time (`--deadline`): once its time limit no longer fits before
    /// it, the job leaves the queue unstarted, as DEADLINE.
    #[serde(default)]
    pub deadline: Option<Timestamp>,
    /// `--dependency=singleton`: it waits while an earlier job of its user with its name is
    /// waiting or running.
    #[serde(default)]
    pub singleton: bool,
    /// `--preemptible`: it may be stopped and requeued once past its minimum runtime, and is
    /// charged at the preemptible rate.
    #[serde(default)]
    pub preemptible: bool,
    /// An interactive session: never preempted (a person is typing in it).
    #[serde(default)]
    pub interactive: bool,
    /// The reservation it runs in (`--reservation`): only there, and never preempted.
    #[serde(default)]
    pub reservation: Option<String>,
}

/// Who holds a job, which says who may release it: its owner (or an admin), or only an admin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldBy {
    /// Its owner held it (`--hold`, `labpool hold`); Slurm's `JobHeldUser`.
    User,
    /// An admin held another user's job; only an admin releases it. Slurm's `JobHeldAdmin`.
    Admin,
}

impl HoldBy {
    /// Slurm's reason word for a job held this way.
    pub fn reason(self) -> &'static str {
        match self {
            HoldBy::User => "JobHeldUser",
            HoldBy::Admin => "JobHeldAdmin",
        }
    }
}

/// Which nodes a job may run on, as it asked: `--constraint`, `--nodelist`, `--exclude`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NodeRequest {
    /// Features its nodes must have.
    #[serde(default)]
    pub constraint: Option<crate::constraint::Constraint>,
    /// Nodes it must run on (all of them in its allocation).
    #[serde(default)]
    pub nodelist: Vec<String>,
    /// Nodes it must not run on.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// Any node will do: a request that asks nothing of its nodes, to borrow for `'static`.
pub static ANY_NODE: NodeRequest = NodeRequest {
    constraint: None,
    nodelist: Vec::new(),
    exclude: Vec::new(),
};

impl NodeRequest {
    /// True when the job asks nothing of its nodes beyond resources.
    pub fn is_any(&self) -> bool {
        self.constraint.is_none() && self.nodelist.is_empty() && self.exclude.is_empty()
    }

    /// True when a node with this name and these features may take the job.
    pub fn allows(&self, name: &str, features: &[String]) -> bool {
        (self.nodelist.is_empty() || self.nodelist.iter().any(|n| n == name))
            && !self.exclude.iter().any(|n| n == name)
            && self.constraint.as_ref().is_none_or(|c| c.holds(features))
    }
}

/// A job's place in an array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The array's id (the id of its first task).
    pub array_id: JobId,
    /// This task's index.
    pub task: u32,
    /// At most this many of the array's tasks run at once.
    pub throttle: Option<u32>,
}

/// Where a running job is, and what it holds there. A gang's first node (the one its batch
/// script runs on, rank 0's) is `node`; the others are in `others`, in node order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// When it started.
    pub start: Timestamp,
    /// Node name: the job's only node, or its gang's first.
    pub node: String,
    /// GPU indexes on that node, as NVML numbers them.
    pub gpus: Vec<u32>,
    /// CPU cores held.
    pub cpus: u32,
    /// Memory held, MiB.
    pub mem_mib: u64,
    /// The job holds one share slot of each of its GPUs (it asked for `--gpu-share`), rather
    /// than the GPUs whole; other sharing jobs may hold the same GPUs.
    #[serde(default)]
    pub shared: bool,
    /// Share units it holds on each of its GPUs when `shared` (see [`crate::slice`]): a
    /// slice's shards, 1 for `--gpu-share`.
    #[serde(default = "one_unit")]
    pub units: u8,
    /// A gang's other nodes, with what it holds on each (the same cores and memory as on
    /// `node`, GPUs by their own indexes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<NodeShare>,
    /// The TCP ports leased to the job on all of its nodes (`MASTER_PORT` is the first), never
    /// leased to another running job at the same time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<PortBlock>,
}

/// What a job holds on one node of its allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeShare {
    /// Node name.
    pub node: String,
    /// GPU indexes on that node.
    pub gpus: Vec<u32>,
    /// CPU cores held there.
    pub cpus: u32,
    /// Memory held there, MiB.
    pub mem_mib: u64,
}

impl NodeShare {
    /// This share, borrowed.
    pub fn part(&self) -> Part<'_> {
        Part {
            node: &self.node,
            gpus: &self.gpus,
            cpus: self.cpus,
            mem_mib: self.mem_mib,
        }
    }
}

/// What a job holds on one node of its allocation, borrowed from the allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part<'a> {
    /// Node name.
    pub node: &'a str,
    /// GPU indexes on that node.
    pub gpus: &'a [u32],
    /// CPU cores held there.
    pub cpus: u32,
    /// Memory held there, MiB.
    pub mem_mib: u64,
}

/// A run of TCP ports: `first`, `first + 1`, … `first + count - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBlock {
    /// The first port.
    pub first: u16,
    /// How many.
    pub count: u16,
}

impl PortBlock {
    /// One past the last port, as a wider number so that a block ending at 65535 fits.
    pub fn end(&self) -> u32 {
        self.first as u32 + self.count as u32
    }
}

impl Allocation {
    /// Every node of the allocation with what the job holds there, the first node first,
    /// borrowed (a pass walks them for every running job).
    pub fn parts(&self) -> impl Iterator<Item = Part<'_>> {
        let first = Part {
            node: &self.node,
            gpus: &self.gpus,
            cpus: self.cpus,
            mem_mib: self.mem_mib,
        };
        std::iter::once(first).chain(self.others.iter().map(NodeShare::part))
    }

    /// The names of its nodes, the first node first.
    pub fn node_names(&self) -> Vec<&str> {
        self.parts().map(|p| p.node).collect()
    }

    /// Its nodes as Slurm writes a node list: `gpu1`, or `gn[1-2]`.
    pub fn nodelist(&self) -> String {
        let names: Vec<String> = self.parts().map(|p| p.node.to_string()).collect();
        crate::hostlist::compress(&names)
    }

    /// Share units it holds on each of its GPUs: 0 when it holds them whole.
    pub fn held_units(&self) -> u8 {
        if self.shared { self.units.max(1) } else { 0 }
    }

    /// GPUs held over all of its nodes.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len() + self.others.iter().map(|s| s.gpus.len()).sum::<usize>()
    }

    /// True when it holds something on `node`.
    pub fn is_on(&self, node: &str) -> bool {
        self.node == node || self.others.iter().any(|s| s.node == node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_words_round_trip() {
        for st in JobState::ALL {
            assert_eq!(st.as_str().parse::<JobState>().unwrap(), st);
            assert_eq!(
                serde_json::to_string(&st).unwrap(),
                format!("\"{}\"", st.as_str())
            );
        }
        assert!("DONE".parse::<JobState>().is_err());
        assert!(JobState::Timeout.is_finished() && !JobState::Running.is_finished());
    }
}
