//! Preemption in the simulator, carried out as the daemon's agents do: a victim gets its
//! notice, saves a checkpoint, and is stopped when the grace period ends; requeued, it resumes
//! from the checkpoint. The GPU time between notice and stop is what preemption loses.

use labpool_scheduler::{JobId, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// What preemption did in a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preemptions {
    /// Victims told to stop: (notice, stop).
    pub(crate) stopping: BTreeMap<JobId, (Timestamp, Timestamp)>,
    /// Compute seconds each requeued job has checkpointed.
    pub(crate) done_s: BTreeMap<JobId, f64>,
    /// Jobs that fit within their account's share when submitted.
    pub(crate) owners: BTreeSet<JobId>,
    /// When each job was first given GPUs (a requeued job is placed again later).
    pub(crate) first_placed: BTreeMap<JobId, Timestamp>,
    /// Notices carried out.
    pub(crate) count: u64,
    /// GPU-seconds between notice and stop.
    pub(crate) lost_gpu_s: f64,
    /// GPU-seconds held by attempts that were preempted, placement to stop.
    pub(crate) held_gpu_s: f64,
    /// GPU-seconds of the pool while some job waited.
    pub(crate) demand_gpu_s: f64,
    /// GPU-seconds given out while some job waited.
    pub(crate) held_with_demand_gpu_s: f64,
}

impl Preemptions {
    /// A victim got its notice at `now`; it stops at `now + grace_s`.
    pub(crate) fn notice(&mut self, job: JobId, now: Timestamp, grace_s: u64) {
        self.stopping
            .entry(job)
            .or_insert((now, now.plus_secs(grace_s)));
    }

    /// The victims whose grace ends by `now`, with when.
    pub(crate) fn due(&self, now: Timestamp) -> Vec<(JobId, Timestamp)> {
        self.stopping
            .iter()
            .filter(|(_, (_, stop))| *stop <= now)
            .map(|(id, (_, stop))| (*id, *stop))
            .collect()
    }

    /// A victim was requeued at `now`: it placed at `placed`, computed from `compute`, on
    /// `gpus` GPUs; the work up to its notice is kept.
    pub(crate) fn requeued(
        &mut self,
        job: JobId,
        gpus: u32,
        placed: Timestamp,
        compute: Timestamp,
        now: Timestamp,
    ) {
        let secs = |a: Timestamp, b: Timestamp| (b.0 - a.0).max(0) as f64 / 1000.0;
        let notice = self.stopping.remove(&job).map_or(now, |(n, _)| n);
        *self.done_s.entry(job).or_default() += secs(compute, notice.max(compute));
        self.lost_gpu_s += gpus as f64 * secs(notice, now);
        self.held_gpu_s += gpus as f64 * secs(placed, now);
        self.count += 1;
    }
}
