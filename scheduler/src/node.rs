//! Nodes: what a node has, and what of it is in use.

use crate::job::{Allocation, JobId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GPU of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDevice {
    /// Index as NVML (and `CUDA_DEVICE_ORDER=PCI_BUS_ID`) numbers it.
    pub index: u32,
    /// Short type, such as `rtx4090`.
    pub gpu_type: String,
    /// Product name as the driver reports it, or "virtual".
    pub product: String,
    /// Memory in MiB; 0 when unknown.
    pub memory_mib: u64,
    /// UUID, when the driver reports one.
    pub uuid: Option<String>,
}

/// What a node has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// The node's name.
    pub name: String,
    /// Its GPUs, by index.
    pub gpus: Vec<GpuDevice>,
    /// CPU cores the pool may use.
    pub cpus: u32,
    /// Memory the pool may use, MiB.
    pub mem_mib: u64,
}

/// A node's state, in Slurm's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NodeState {
    /// Up, nothing running.
    Idle,
    /// Up, partly in use.
    Mixed,
    /// Up, every GPU (or every core, on a node without GPUs) in use.
    Allocated,
    /// Taking no new jobs; jobs still running.
    Draining,
    /// Taking no new jobs; nothing running.
    Drained,
    /// Not answering.
    Down,
}

impl NodeState {
    /// The Slurm word.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Idle => "IDLE",
            NodeState::Mixed => "MIXED",
            NodeState::Allocated => "ALLOCATED",
            NodeState::Draining => "DRAINING",
            NodeState::Drained => "DRAINED",
            NodeState::Down => "DOWN",
        }
    }
}

/// A node as the scheduler tracks it: its spec, its health and its allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// What it has.
    pub spec: NodeSpec,
    /// Why it is down, when it is.
    pub down: Option<String>,
    /// Why it is draining, when it is.
    pub drain: Option<String>,
    gpu_owner: BTreeMap<u32, JobId>,
    cpus_used: u32,
    mem_used: u64,
}

impl Node {
    /// A node that is up and empty.
    pub fn new(spec: NodeSpec) -> Node {
        Node {
            spec,
            down: None,
            drain: None,
            gpu_owner: BTreeMap::new(),
            cpus_used: 0,
            mem_used: 0,
        }
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// True when the node may take new jobs.
    pub fn accepts_jobs(&self) -> bool {
        self.down.is_none() && self.drain.is_none()
    }

    /// The state to show.
    pub fn state(&self) -> NodeState {
        let busy = !self.gpu_owner.is_empty() || self.cpus_used > 0;
        if self.down.is_some() {
            NodeState::Down
        } else if self.drain.is_some() {
            if busy {
                NodeState::Draining
            } else {
                NodeState::Drained
            }
        } else if !busy {
            NodeState::Idle
        } else if (self.spec.gpus.is_empty() || self.gpu_owner.len() == self.spec.gpus.len())
            && (!self.spec.gpus.is_empty() || self.cpus_used >= self.spec.cpus)
        {
            NodeState::Allocated
        } else {
            NodeState::Mixed
        }
    }

    /// GPUs of `gpu_type` (any type when `None`) the node has in all.
    pub fn gpus_of_type(&self, gpu_type: Option<&str>) -> impl Iterator<Item = &GpuDevice> {
        self.spec
            .gpus
            .iter()
            .filter(move |g| gpu_type.is_none_or(|t| g.gpu_type == t))
    }

    /// Free GPUs of `gpu_type`, lowest index first.
    pub fn free_gpus(&self, gpu_type: Option<&str>) -> impl Iterator<Item = u32> {
        self.gpus_of_type(gpu_type)
            .map(|g| g.index)
            .filter(|i| !self.gpu_owner.contains_key(i))
    }

    /// The GPUs of `gpu_type` (any type when `None`) as a bit mask (bit `i` is GPU index `i`).
    pub fn type_mask(&self, gpu_type: Option<&str>) -> u64 {
        self.gpus_of_type(gpu_type)
            .fold(0, |m, g| m | (1u64 << g.index))
    }

    /// What is free now, as the backfill profile starts from.
    pub fn free_capacity(&self) -> crate::profile::Capacity {
        let all = self.type_mask(None);
        let held = self.gpu_owner.keys().fold(0u64, |m, i| m | (1u64 << i));
        crate::profile::Capacity {
            gpus: all & !held,
            cpus: self.free_cpus() as i64,
            mem: self.free_mem_mib() as i64,
        }
    }

    /// The job holding GPU `index`, if any.
    pub fn gpu_owner(&self, index: u32) -> Option<JobId> {
        self.gpu_owner.get(&index).copied()
    }

    /// Cores not held by a job.
    pub fn free_cpus(&self) -> u32 {
        self.spec.cpus.saturating_sub(self.cpus_used)
    }

    /// Memory not held by a job, MiB.
    pub fn free_mem_mib(&self) -> u64 {
        self.spec.mem_mib.saturating_sub(self.mem_used)
    }

    /// Records `job` as holding `alloc`. The caller has checked that it fits.
    pub(crate) fn hold(&mut self, job: JobId, alloc: &Allocation) {
        for g in &alloc.gpus {
            self.gpu_owner.insert(*g, job);
        }
        self.cpus_used += alloc.cpus;
        self.mem_used += alloc.mem_mib;
    }

    /// Frees what `job` held under `alloc`.
    pub(crate) fn release(&mut self, job: JobId, alloc: &Allocation) {
        for g in &alloc.gpus {
            if self.gpu_owner.get(g) == Some(&job) {
                self.gpu_owner.remove(g);
            }
        }
        self.cpus_used = self.cpus_used.saturating_sub(alloc.cpus);
        self.mem_used = self.mem_used.saturating_sub(alloc.mem_mib);
    }

    /// Cores and memory in use, for invariant checks.
    pub(crate) fn used(&self) -> (u32, u64) {
        (self.cpus_used, self.mem_used)
    }

    /// Every GPU that is held, with its holder.
    pub fn held_gpus(&self) -> impl Iterator<Item = (u32, JobId)> + '_ {
        self.gpu_owner.iter().map(|(g, j)| (*g, *j))
    }
}
