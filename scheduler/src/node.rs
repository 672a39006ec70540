//! Nodes: what a node has, and what of it is in use.
//!
//! A GPU is held either whole, by one job, or in share slots: a GPU configured with
//! `share = N` (N > 1) may be held by up to N jobs that asked for `--gpu-share` at once, and by
//! no whole holder meanwhile. A GPU with `share = 1` (the default) is never shared.
//!
//! A GPU may also be taken by foreign load: over the Slurm executor, jobs that Slurm runs and
//! that did not come through labpool. The pool never places over them; which of its indexes
//! count as foreign is nominal (Slurm picks the real devices), so only their number per type
//! matters, and they are the highest free indexes.

use crate::job::{JobId, Part};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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
    /// How many `--gpu-share` jobs may hold this GPU at once; 1 (the default) means it is never
    /// shared. Values over 255 count as 255.
    #[serde(default = "one")]
    pub share: u32,
    /// The slices the card may be cut into, as denominators (`[2, 4]`: halves and quarters);
    /// empty when it is not sliced. A sliced card's `share` is its shards (see
    /// [`crate::slice`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<u32>,
    /// The one GPU of the node it is linked to by NVLink, when it is linked in a pair (see
    /// [`crate::pairs`]); `None` when it has no link, or links to several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_peer: Option<u32>,
}

fn one() -> u32 {
    1
}

impl GpuDevice {
    /// True when sharing jobs may hold this GPU (`share` > 1).
    pub fn shareable(&self) -> bool {
        self.share > 1
    }

    /// True when the card is cut into slices with memory of their own.
    pub fn sliced(&self) -> bool {
        !self.slices.is_empty()
    }
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
    /// Features an admin gave it (`[node] features`), for `--constraint`.
    #[serde(default)]
    pub features: Vec<String>,
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
    /// Why it is not responding, when it is not (Slurm's `*`): its agent missed heartbeats or
    /// takes no orders. Nothing new is placed there; its jobs keep their GPUs until it answers
    /// again or is declared DOWN.
    pub not_responding: Option<String>,
    /// Whole holders, by GPU index.
    gpu_owner: BTreeMap<u32, JobId>,
    /// Sharing holders with the share units each holds, by GPU index; an entry is never
    /// empty.
    gpu_sharers: BTreeMap<u32, BTreeMap<JobId, u8>>,
    /// GPUs taken by load outside the pool (see the module's comment).
    foreign: BTreeSet<u32>,
    /// How many GPUs per type the load outside the pool holds, as last told.
    foreign_wanted: BTreeMap<Option<String>, u32>,
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
            not_responding: None,
            gpu_owner: BTreeMap::new(),
            gpu_sharers: BTreeMap::new(),
            foreign: BTreeSet::new(),
            foreign_wanted: BTreeMap::new(),
            cpus_used: 0,
            mem_used: 0,
        }
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// True when the node may take new jobs: up, answering and not draining.
    pub fn accepts_jobs(&self) -> bool {
        self.down.is_none() && self.drain.is_none() && self.not_responding.is_none()
    }

    /// GPUs held by any job, whole or shared, or by foreign load.
    fn busy_gpus(&self) -> usize {
        self.gpu_owner.len()
            + self
                .gpu_sharers
                .keys()
                .filter(|g| !self.gpu_owner.contains_key(g))
                .count()
            + self.foreign.len()
    }

    /// True when GPU `index` is held by a pool job (whole or shared) or by foreign load.
    fn taken(&self, index: u32) -> bool {
        self.gpu_owner.contains_key(&index)
            || self.gpu_sharers.contains_key(&index)
            || self.foreign.contains(&index)
    }

    /// Sets the foreign load: `wanted` GPUs per type (`None`: any type), taken from the highest
    /// indexes that no pool job holds. Where fewer are free than wanted (a pool job and a
    /// foreign one raced for the same GPUs), it takes what is free; the shell notices the pool
    /// job that cannot start. Returns the GPUs now foreign.
    pub fn set_foreign(&mut self, wanted: &BTreeMap<Option<String>, u32>) -> Vec<u32> {
        self.foreign_wanted = wanted.clone();
        self.fill_foreign();
        self.foreign.iter().copied().collect()
    }

    /// Takes the foreign load's GPUs from those free. Run again whenever a pool job frees
    /// GPUs: a foreign job that raced a pool job for them holds them once the pool job is gone
    /// (cancelled in Slurm and placed again), though Slurm's view has not changed.
    fn fill_foreign(&mut self) {
        self.foreign.clear();
        let wanted = std::mem::take(&mut self.foreign_wanted);
        for (gpu_type, n) in &wanted {
            let mut free: Vec<u32> = self
                .gpus_of_type(gpu_type.as_deref())
                .map(|g| g.index)
                .filter(|i| !self.taken(*i))
                .collect();
            free.reverse();
            free.truncate(*n as usize);
            self.foreign.extend(free);
        }
        self.foreign_wanted = wanted;
    }

    /// Whether a suspended job may hold GPU `index` whole again: the node has it, no pool job
    /// holds it, and foreign load (a count; its indexes are nominal) fits on another free GPU
    /// of its type when it sits there now.
    pub(crate) fn can_take_back(&self, index: u32) -> bool {
        let Some(device) = self.spec.gpus.iter().find(|g| g.index == index) else {
            return false;
        };
        if self.gpu_owner.contains_key(&index) || self.gpu_sharers.contains_key(&index) {
            return false;
        }
        !self.foreign.contains(&index)
            || self
                .spec
                .gpus
                .iter()
                .any(|g| g.index != index && g.gpu_type == device.gpu_type && !self.taken(g.index))
    }

    /// Places the foreign load again, after a pool job took GPUs it sat on nominally.
    pub(crate) fn refill_foreign(&mut self) {
        if !self.foreign_wanted.is_empty() {
            self.fill_foreign();
        }
    }

    /// GPUs taken by foreign load, by index.
    pub fn foreign_gpus(&self) -> impl Iterator<Item = u32> + '_ {
        self.foreign.iter().copied()
    }

    /// The state to show. A GPU with sharers counts as in use, even with slots left.
    pub fn state(&self) -> NodeState {
        let busy = self.busy_gpus() > 0 || self.cpus_used > 0;
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
        } else if (self.spec.gpus.is_empty() || self.busy_gpus() == self.spec.gpus.len())
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

    /// Wholly free GPUs of `gpu_type` (held by no job, whole or shared), lowest index first.
    pub fn free_gpus(&self, gpu_type: Option<&str>) -> impl Iterator<Item = u32> {
        self.gpus_of_type(gpu_type)
            .map(|g| g.index)
            .filter(|i| !self.taken(*i))
    }

    /// The GPUs of `gpu_type` (any type when `None`) as a bit mask (bit `i` is GPU index `i`).
    pub fn type_mask(&self, gpu_type: Option<&str>) -> u64 {
        self.gpus_of_type(gpu_type)
            .fold(0, |m, g| m | (1u64 << g.index))
    }

    /// The GPUs of `gpu_type` (any type when `None`) that sharing jobs may hold (`share` > 1),
    /// as a bit mask.
    pub fn shareable_mask(&self, gpu_type: Option<&str>) -> u64 {
        self.gpus_of_type(gpu_type)
            .filter(|g| g.shareable())
            .fold(0, |m, g| m | (1u64 << g.index))
    }

    /// Each GPU's NVLink partner by index, [`crate::pairs::NO_PARTNER`] where it has none.
    pub fn partners(&self) -> [u8; 64] {
        let mut out = [crate::pairs::NO_PARTNER; 64];
        for g in &self.spec.gpus {
            if let (Some(slot), Some(p)) = (out.get_mut(g.index as usize), g.nvlink_peer)
                && p < 64
            {
                *slot = p as u8;
            }
        }
        out
    }

    /// Each GPU's `share` (at most 255), by index; 0 where the node has no such GPU.
    pub fn share_limits(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        for g in &self.spec.gpus {
            if let Some(slot) = out.get_mut(g.index as usize) {
                *slot = g.share.clamp(1, 255) as u8;
            }
        }
        out
    }

    /// What is free now, as the backfill profile starts from: GPUs held by no job as the mask,
    /// and each GPU's sharing holders as its share count.
    pub fn free_capacity(&self) -> crate::profile::Capacity {
        let all = self.type_mask(None);
        let mut held = self
            .gpu_owner
            .keys()
            .chain(&self.foreign)
            .fold(0u64, |m, i| m | (1u64 << i));
        let mut shared = [0u8; 64];
        for (g, jobs) in &self.gpu_sharers {
            held |= 1u64 << g;
            let units: u32 = jobs.values().map(|u| u32::from(*u)).sum();
            shared[*g as usize] = units.min(255) as u8;
        }
        crate::profile::Capacity {
            gpus: all & !held,
            shared,
            cpus: self.free_cpus() as i64,
            mem: self.free_mem_mib() as i64,
        }
    }

    /// The job holding GPU `index` whole, if any; sharing holders are not counted here (see
    /// [`Node::gpu_holders`]).
    pub fn gpu_owner(&self, index: u32) -> Option<JobId> {
        self.gpu_owner.get(&index).copied()
    }

    /// Every job holding GPU `index`: its whole holder, or its sharing holders (by id).
    pub fn gpu_holders(&self, index: u32) -> Vec<JobId> {
        self.gpu_owner
            .get(&index)
            .copied()
            .into_iter()
            .chain(
                self.gpu_sharers
                    .get(&index)
                    .into_iter()
                    .flat_map(|m| m.keys())
                    .copied(),
            )
            .collect()
    }

    /// The jobs sharing GPU `index` (empty when it is free or held whole), by id.
    pub fn gpu_sharers(&self, index: u32) -> impl Iterator<Item = JobId> + '_ {
        self.gpu_sharers
            .get(&index)
            .into_iter()
            .flat_map(|m| m.keys())
            .copied()
    }

    /// The share units that sharing jobs hold on GPU `index`, all together.
    pub fn shared_units(&self, index: u32) -> u32 {
        self.gpu_sharers
            .get(&index)
            .map_or(0, |m| m.values().map(|u| u32::from(*u)).sum())
    }

    /// The share units `job` holds on GPU `index`: 0 when it holds none there.
    pub fn units_of(&self, index: u32, job: JobId) -> u8 {
        self.gpu_sharers
            .get(&index)
            .and_then(|m| m.get(&job))
            .copied()
            .unwrap_or(0)
    }

    /// Cores not held by a job.
    pub fn free_cpus(&self) -> u32 {
        self.spec.cpus.saturating_sub(self.cpus_used)
    }

    /// Memory not held by a job, MiB.
    pub fn free_mem_mib(&self) -> u64 {
        self.spec.mem_mib.saturating_sub(self.mem_used)
    }

    /// Records `job` as holding `part` of its allocation: `units` share units of each GPU, or
    /// the GPUs whole when `units` is 0. The caller has checked that it fits.
    pub(crate) fn hold(&mut self, job: JobId, part: Part<'_>, units: u8) {
        for g in part.gpus {
            if units > 0 {
                self.gpu_sharers.entry(*g).or_default().insert(job, units);
            } else {
                self.gpu_owner.insert(*g, job);
            }
        }
        self.cpus_used += part.cpus;
        self.mem_used += part.mem_mib;
    }

    /// Frees what `job` held here under `part`.
    pub(crate) fn release(&mut self, job: JobId, part: Part<'_>, units: u8) {
        for g in part.gpus {
            if units > 0 {
                if let Some(jobs) = self.gpu_sharers.get_mut(g) {
                    jobs.remove(&job);
                    if jobs.is_empty() {
                        self.gpu_sharers.remove(g);
                    }
                }
            } else if self.gpu_owner.get(g) == Some(&job) {
                self.gpu_owner.remove(g);
            }
        }
        self.cpus_used = self.cpus_used.saturating_sub(part.cpus);
        self.mem_used = self.mem_used.saturating_sub(part.mem_mib);
        if !self.foreign_wanted.is_empty() {
            self.fill_foreign();
        }
    }

    /// Cores and memory in use, for invariant checks.
    pub(crate) fn used(&self) -> (u32, u64) {
        (self.cpus_used, self.mem_used)
    }

    /// Every (GPU, holder) pair, whole holders and sharing holders alike, by GPU index then
    /// job id. A shared GPU appears once per sharing job.
    pub fn held_gpus(&self) -> impl Iterator<Item = (u32, JobId)> + '_ {
        let mut pairs: Vec<(u32, JobId)> = self
            .gpu_owner
            .iter()
            .map(|(g, j)| (*g, *j))
            .chain(
                self.gpu_sharers
                    .iter()
                    .flat_map(|(g, jobs)| jobs.keys().map(move |j| (*g, *j))),
            )
            .collect();
        pairs.sort_unstable();
        pairs.into_iter()
    }
}
