//! Reservations in a pass: their GPUs are kept from every other job over their window, and a
//! job submitted into one starts only there (see [`crate::reservation`]).

use super::consider::PassState;
use crate::cache_view::CacheView;
use crate::job::{JobId, JobSpec};
use crate::node::Node;
use crate::profile::{Capacity, Need, Profile, lowest_bits};
use crate::reason::PendingReason;
use crate::scheduler::{Decision, Scheduler};
use crate::time::Timestamp;

impl Scheduler {
    /// Books every reservation not yet ended in the profiles of its node, over its window,
    /// for everyone: only jobs that end before a window starts may use its GPUs.
    pub(crate) fn carve_reservations(&self, nodes: &[&Node], profiles: &mut [Profile]) {
        for (node, profile) in nodes.iter().zip(profiles.iter_mut()) {
            self.carve_node(node.name(), profile);
        }
    }

    /// Books the reservations on `node` in its `profile` (again: capacity given back over a
    /// window must not free its GPUs).
    pub(crate) fn carve_node(&self, node: &str, profile: &mut Profile) {
        for r in self.reservations.values().filter(|r| r.node == node) {
            profile.take(r.start, r.end, booked(r));
        }
    }

    /// The profiles as an opportunistic (preemptible or borrowing) job sees them: the GPUs of
    /// reservations that open later than a grace period from now are free to it, since it is
    /// told to stop in time (see [`Scheduler::reservation_notices`]). `None` when no
    /// reservation is that far off: the pass's own profiles are the view.
    pub(crate) fn uncarved(
        &self,
        nodes: &[&Node],
        profiles: &[Profile],
        now: Timestamp,
    ) -> Option<Vec<Profile>> {
        let soon = now.plus_secs(self.policy.preemption.grace_s);
        let mut later = self
            .reservations
            .values()
            .filter(|r| r.start > soon)
            .peekable();
        later.peek()?;
        let mut out = profiles.to_vec();
        for r in later {
            if let Some(i) = nodes.iter().position(|n| n.name() == r.node) {
                out[i].give(r.start, r.end, booked(r));
            }
        }
        Some(out)
    }

    /// Notices for the preemptible jobs on a reservation's GPUs once its window is a grace
    /// period away, whatever their runtime, so that its GPUs are free when it opens. They are
    /// recorded as preempted for job 0, which stands for a reservation.
    pub(crate) fn reservation_notices(&mut self, now: Timestamp) -> Vec<Decision> {
        let grace = self.policy.preemption.grace_s;
        if !self.policy.preemption.enabled {
            return Vec::new();
        }
        let mut out = Vec::new();
        for r in self.reservations.values() {
            if r.start > now.plus_secs(grace) || r.end <= now {
                continue;
            }
            for (job, alloc) in self.running.values() {
                let on_it = alloc
                    .parts()
                    .any(|p| p.node == r.node && p.gpus.iter().any(|g| r.gpus.contains(g)));
                let inside = job.reservation.as_deref() == Some(r.name.as_str());
                // One that ends by the window by its time limit is let be.
                let overlaps = alloc.start.plus_limit(job.time_limit) > r.start;
                if on_it && !inside && overlaps && !self.notices.contains_key(&job.id) {
                    out.push((job.id, format!("reservation {} opens", r.name)));
                }
            }
        }
        out.into_iter()
            .map(|(job, cause)| {
                crate::preempt::give_notice(&mut self.notices, job, JobId(0), cause, now)
            })
            .collect()
    }

    /// Starts `job` inside reservation `name` now if it can (`None`), else why it waits.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_in_reservation(
        &self,
        id: JobId,
        job: &JobSpec,
        name: &str,
        nodes: &[&Node],
        state: &mut PassState,
        now: Timestamp,
        cache: &dyn CacheView,
    ) -> Option<PendingReason> {
        let wait = |code: &str, detail: String| Some(PendingReason::new(code, detail));
        let Some(r) = self.reservations.get(name) else {
            return wait(
                "InvalidReservation",
                format!(
                    "reservation {name} no longer exists (ended or deleted); cancel the job and resubmit without --reservation"
                ),
            );
        };
        if !self.may_use(r, job) {
            return wait(
                "InvalidReservation",
                format!("{} may not use reservation {name}", job.user),
            );
        }
        if now < r.start {
            return wait(
                "Reservation",
                format!("waits for reservation {name} to start (`labpool reservation list`)"),
            );
        }
        let end = now.plus_limit(job.time_limit);
        if end > r.end {
            return wait(
                "Reservation",
                format!(
                    "its time limit ({}) no longer fits in what is left of reservation {name}; cancel it, or resubmit with a shorter --time",
                    job.time_limit
                ),
            );
        }
        let Some(i) = nodes.iter().position(|n| n.name() == r.node) else {
            return wait(
                "ReqNodeNotAvail",
                format!("reservation {name}'s node {} is not in the pool", r.node),
            );
        };
        let node = nodes[i];
        if !node.accepts_jobs() {
            return wait(
                "ReqNodeNotAvail",
                format!("reservation {name}'s node {} is down or draining", r.node),
            );
        }
        // Its GPUs not held now, by a running job or one started in this pass.
        let mut free = r.mask()
            & node.free_capacity().gpus
            & node.type_mask(job.resources.gpu_type.as_deref());
        for (_, alloc, _) in &state.started {
            for part in alloc.parts().filter(|p| p.node == r.node) {
                for g in part.gpus {
                    free &= !(1u64 << g);
                }
            }
        }
        let res = &job.resources;
        let room = Need::whole(0, 0, res.cpus as i64, res.mem_mib as i64);
        if free.count_ones() < res.gpus || state.profiles[i].fits(now, end, &room).is_none() {
            return wait(
                "Resources",
                format!(
                    "reservation {name}'s {} GPUs on {} are in use by its other jobs",
                    r.gpus.len(),
                    r.node
                ),
            );
        }
        let mask = lowest_bits(free, res.gpus);
        let gpus = (0..64).filter(|g| mask & (1u64 << g) != 0).collect();
        self.start_on(id, job, vec![(i, gpus)], nodes, state, now, cache);
        None
    }
}

/// What a reservation books on its node: its GPUs.
fn booked(r: &crate::reservation::Reservation) -> Capacity {
    Capacity {
        gpus: r.mask(),
        ..Capacity::default()
    }
}
