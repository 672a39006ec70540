//! How much of a GPU a job counts for in limits (`GrpTRES`, `MaxTRESPerUser`), credits and fair
//! share: a slice by its fraction of the card, in thousandths; anything else whole.

use super::Scheduler;
use crate::job::{Allocation, JobSpec};
use crate::slice::{Slice, milli_gpus};

impl Scheduler {
    /// Thousandths of GPUs `alloc` holds: each GPU of a sliced card by the shards it holds,
    /// every other GPU whole (an unmetered `--gpu-share` included).
    pub fn held_milli(&self, alloc: &Allocation) -> u32 {
        alloc
            .parts()
            .flat_map(|part| {
                let node = self.nodes.get(part.node);
                part.gpus.iter().map(move |g| {
                    node.and_then(|n| n.spec.gpus.iter().find(|d| d.index == *g))
                        .filter(|d| alloc.shared && d.sliced())
                        .map_or(1000, |d| milli_gpus(d, alloc.held_units()))
                })
            })
            .sum()
    }

    /// Thousandths of GPUs a job that asked for `r` held on `gpus` of `node`, worked out again
    /// from what it asked (for jobs read back from the history).
    pub fn ran_milli(&self, r: &crate::job::Resources, node: &str, gpus: &[u32]) -> u32 {
        let node = self.nodes.get(node);
        gpus.iter()
            .map(|g| {
                node.and_then(|n| n.spec.gpus.iter().find(|d| d.index == *g))
                    .filter(|d| r.shares_gpus() && d.sliced())
                    .map_or(1000, |d| milli_gpus(d, crate::slice::units_on(r, d).max(1)))
            })
            .sum()
    }

    /// Thousandths of GPUs `job` would hold if it started now. A typed slice is its fraction;
    /// `shard:N` is the largest fraction any sliced card of the pool would make of it, so that
    /// starting it never takes a limit further than it was checked for.
    pub(crate) fn asked_milli(&self, job: &JobSpec) -> u32 {
        let r = &job.resources;
        match r.slice {
            Some(Slice::Fraction(d)) if r.gpus > 0 => 1000u32.div_ceil(d.max(1)),
            Some(Slice::Shards(n)) if r.gpus > 0 => self
                .nodes
                .values()
                .flat_map(|node| node.spec.gpus.iter())
                .filter(|d| d.sliced() && n <= d.share)
                .map(|d| milli_gpus(d, n.min(255) as u8))
                .max()
                .unwrap_or(1000),
            _ => r.total_gpus().saturating_mul(1000),
        }
    }
}
