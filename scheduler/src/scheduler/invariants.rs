//! The invariants: what must always hold between the nodes' books and the running jobs.

use super::Scheduler;
use crate::job::JobId;
use std::collections::{BTreeMap, BTreeSet};

impl Scheduler {
    /// Checks what must always hold: no GPU is given twice (a GPU has one whole holder, or up to
    /// its `share` sharing holders, never both), no node is over-committed, and the nodes' books
    /// agree with the running jobs'. Tests call it after every step.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (id, (_, alloc)) in &self.running {
            if self.pending.contains_key(id) {
                return Err(format!("job {id} is both pending and running"));
            }
            for name in alloc.node_names() {
                if !self.nodes.contains_key(name) {
                    return Err(format!("job {id} runs on unknown node {name}"));
                }
            }
            let mut names = alloc.node_names();
            names.sort_unstable();
            names.dedup();
            if names.len() != alloc.others.len() + 1 {
                return Err(format!(
                    "job {id} holds a node twice: {:?}",
                    alloc.node_names()
                ));
            }
        }
        // A suspended job runs, holds no GPU, and comes back to GPUs it named.
        for (id, s) in &self.suspended {
            let Some((_, alloc)) = self.running.get(id) else {
                return Err(format!("job {id} is suspended but not running"));
            };
            if !alloc.gpus.is_empty() {
                return Err(format!("suspended job {id} holds GPUs {:?}", alloc.gpus));
            }
            if s.gpus.is_empty() {
                return Err(format!("suspended job {id} has no GPU to come back to"));
            }
        }
        for node in self.nodes.values() {
            let mut cpus = 0u32;
            let mut mem = 0u64;
            // Per GPU: its whole holder, and its sharing holders.
            let mut whole: BTreeMap<u32, JobId> = BTreeMap::new();
            let mut sharers: BTreeMap<u32, Vec<JobId>> = BTreeMap::new();
            let mut units: BTreeMap<u32, u32> = BTreeMap::new();
            let mut gpus: BTreeSet<(u32, JobId)> = BTreeSet::new();
            let parts = self.running.iter().flat_map(|(id, (_, a))| {
                a.parts()
                    .filter(|p| p.node == node.name())
                    .map(move |p| (id, a.held_units(), p))
            });
            for (id, held_units, part) in parts {
                let shared = held_units > 0;
                cpus += part.cpus;
                mem += part.mem_mib;
                for g in part.gpus {
                    let Some(device) = node.spec.gpus.iter().find(|d| d.index == *g) else {
                        return Err(format!(
                            "job {id} holds GPU {g} that {} does not have",
                            node.name()
                        ));
                    };
                    if !gpus.insert((*g, *id)) {
                        return Err(format!("job {id} holds GPU {g} on {} twice", node.name()));
                    }
                    if shared {
                        let on = sharers.entry(*g).or_default();
                        on.push(*id);
                        let total = units.entry(*g).or_default();
                        *total += u32::from(held_units);
                        if on.len() > 1 && *total > device.share.max(1) {
                            return Err(format!(
                                "GPU {g} on {} is shared by jobs {on:?} holding {total} units, over its share of {}",
                                node.name(),
                                device.share
                            ));
                        }
                        if node.units_of(*g, *id) != held_units {
                            return Err(format!(
                                "GPU {g} on {}: job {id} holds {held_units} units but the books say {}",
                                node.name(),
                                node.units_of(*g, *id)
                            ));
                        }
                    } else if let Some(other) = whole.insert(*g, *id) {
                        return Err(format!(
                            "GPU {g} on {} is held by jobs {other} and {id}",
                            node.name()
                        ));
                    }
                    if let (Some(w), Some(on)) = (whole.get(g), sharers.get(g)) {
                        return Err(format!(
                            "GPU {g} on {} is held whole by job {w} and shared by jobs {on:?}",
                            node.name()
                        ));
                    }
                }
            }
            for g in node.spec.gpus.iter().map(|d| d.index) {
                if node.gpu_owner(g) != whole.get(&g).copied() {
                    return Err(format!(
                        "{}: GPU {g} is held whole by {:?} but the books say {:?}",
                        node.name(),
                        whole.get(&g),
                        node.gpu_owner(g)
                    ));
                }
            }
            let held: BTreeSet<(u32, JobId)> = node.held_gpus().collect();
            if held != gpus {
                return Err(format!(
                    "{}: GPU books {held:?} disagree with running jobs {gpus:?}",
                    node.name()
                ));
            }
            if node.used() != (cpus, mem) {
                return Err(format!(
                    "{}: used {:?} but running jobs hold {:?}",
                    node.name(),
                    node.used(),
                    (cpus, mem)
                ));
            }
            if cpus > node.spec.cpus || mem > node.spec.mem_mib {
                return Err(format!(
                    "{} is over-committed: {cpus} CPUs, {mem} MiB",
                    node.name()
                ));
            }
        }
        Ok(())
    }
}
