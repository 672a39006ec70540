//! The books as jobs come and go: queueing, restoring a running job after a restart, removing,
//! finishing, requeueing, and what a running job owes in credits.

use super::{RestoreError, Scheduler};
use crate::job::{Allocation, HoldBy, JobId, JobSpec, JobState, Part};
use crate::time::Timestamp;

impl Scheduler {
    /// Queues an admitted job.
    pub fn enqueue(&mut self, job: JobSpec) {
        self.pending.insert(job.id, job);
    }

    /// Puts back a job that was running before a restart, holding what it held. A whole
    /// allocation is refused where any job holds one of its GPUs; a shared one (`alloc.shared`)
    /// where one of its GPUs is held whole or already has `share` sharers (a lone sharer is put
    /// back even on a GPU whose `share` was lowered to 1 since, and holds it alone).
    pub fn restore_running(
        &mut self,
        job: JobSpec,
        mut alloc: Allocation,
    ) -> Result<(), RestoreError> {
        // The units a sharer holds follow from what it asked and its GPUs' slices, so the
        // caller need not know them.
        if alloc.shared {
            alloc.units = self
                .nodes
                .get(&alloc.node)
                .and_then(|n| {
                    let g = alloc.gpus.first()?;
                    n.spec.gpus.iter().find(|d| d.index == *g)
                })
                .map_or(1, |d| crate::slice::units_on(&job.resources, d).max(1));
        }
        for part in alloc.parts() {
            self.check_restorable(job.id, part, alloc.held_units())?;
        }
        self.hold_nodes(job.id, &alloc);
        self.pending.remove(&job.id);
        self.reasons.remove(&job.id);
        self.notes.remove(&job.id);
        self.running.insert(job.id, (job, alloc));
        Ok(())
    }

    /// Why `part` of a reloaded job's allocation cannot be held again, if it cannot.
    fn check_restorable(&self, job: JobId, part: Part<'_>, units: u8) -> Result<(), RestoreError> {
        let shared = units > 0;
        let err = |problem: String| RestoreError {
            job,
            node: part.node.to_string(),
            problem,
        };
        let Some(node) = self.nodes.get(part.node) else {
            return Err(err("the node is not known".to_string()));
        };
        for g in part.gpus {
            let Some(device) = node.spec.gpus.iter().find(|d| d.index == *g) else {
                return Err(err(format!("GPU {g} no longer exists there")));
            };
            if let Some(other) = node.gpu_owner(*g) {
                return Err(err(format!("GPU {g} is already held by job {other}")));
            }
            let sharers: Vec<String> = node.gpu_sharers(*g).map(|j| j.to_string()).collect();
            if !shared && !sharers.is_empty() {
                return Err(err(format!(
                    "GPU {g} is already shared by jobs {}",
                    sharers.join(", ")
                )));
            }
            let held = node.shared_units(*g);
            // A lone sharer is put back whatever the share now is.
            if shared && !sharers.is_empty() && held + u32::from(units) > device.share.max(1) {
                return Err(err(format!(
                    "GPU {g} already has sharing jobs ({}) holding {held} of its {} share units; this job needs {units}",
                    sharers.join(", "),
                    device.share.max(1)
                )));
            }
        }
        Ok(())
    }

    /// Frees, on each of its nodes, what `job` held under `alloc`.
    pub(crate) fn release_nodes(&mut self, job: JobId, alloc: &Allocation) {
        for part in alloc.parts() {
            if let Some(node) = self.nodes.get_mut(part.node) {
                node.release(job, part, alloc.held_units());
            }
        }
    }

    /// Records, on each of its nodes, that `job` holds `alloc`.
    pub(crate) fn hold_nodes(&mut self, job: JobId, alloc: &Allocation) {
        for part in alloc.parts() {
            if let Some(node) = self.nodes.get_mut(part.node) {
                node.hold(job, part, alloc.held_units());
            }
        }
    }

    /// Holds a waiting job (`Some`) or releases it (`None`). False when it is not waiting.
    pub fn set_hold(&mut self, job: JobId, hold: Option<HoldBy>) -> bool {
        match self.pending.get_mut(&job) {
            Some(spec) => {
                spec.hold = hold;
                // Its reason is told again at the next pass, whatever it was.
                self.reasons.remove(&job);
                true
            }
            None => false,
        }
    }

    /// Changes a waiting job's partition, time limit and dependencies (`labpool update`,
    /// `scontrol update`), already admitted by the caller. False when it is not waiting.
    pub fn update_pending(
        &mut self,
        job: JobId,
        partition: String,
        time_limit: crate::time::TimeLimit,
        dependencies: Vec<crate::dependency::Dependency>,
        singleton: bool,
    ) -> bool {
        let Some(spec) = self.pending.get_mut(&job) else {
            return false;
        };
        spec.partition = partition;
        spec.time_limit = time_limit;
        spec.dependencies = dependencies;
        spec.singleton = singleton;
        self.reasons.remove(&job);
        // What the last pass booked counted the old shape.
        self.memo = None;
        true
    }

    /// The earliest time after `now` a pass is due though nothing else happens: a waiting
    /// job's `--begin` time, the last moment its time limit still fits before its
    /// `--deadline`, or a reservation's edge (a grace before it opens, when its jobs on
    /// borrowed time are told to stop; its start; its end).
    pub fn next_due(&self, now: Timestamp) -> Option<Timestamp> {
        let last_start = |j: &JobSpec| {
            let d = j.deadline?;
            let crate::time::TimeLimit::Seconds(s) = j.time_limit else {
                return None;
            };
            let limit = s as i64 * 1000;
            Some(Timestamp(d.0 - limit + 1))
        };
        let grace_ms = (self.policy.preemption.grace_s as i64).saturating_mul(1000);
        let edges = self
            .reservations
            .values()
            .flat_map(|r| [Timestamp(r.start.0 - grace_ms), r.start, r.end]);
        self.pending
            .values()
            .flat_map(|j| [j.begin, last_start(j)])
            .flatten()
            .chain(edges)
            .filter(|b| *b > now)
            .min()
    }

    /// Removes a waiting job (cancelled). `None` when it was not waiting.
    pub fn remove_pending(&mut self, job: JobId) -> Option<JobSpec> {
        self.reasons.remove(&job);
        self.notes.remove(&job);
        let spec = self.pending.remove(&job)?;
        self.outcomes.insert(job, false);
        Some(spec)
    }

    /// A running job ended at `end` in `state`: frees what it held, and counts its GPU time
    /// toward its user's fair-share usage. Returns its spec and its allocation as it is charged
    /// (for a job that ended suspended: its GPUs, its suspended span left out); `None` when it
    /// was not running.
    pub fn finish(
        &mut self,
        job: JobId,
        state: JobState,
        end: Timestamp,
    ) -> Option<(JobSpec, Allocation)> {
        let (spec, mut alloc) = self.running.remove(&job)?;
        self.release_nodes(job, &alloc);
        self.notices.remove(&job);
        // A job that ends suspended is returned as it is charged: its GPUs, held from a start
        // moved on by the span it spent suspended, as a resume would have moved it.
        if let Some(s) = self.suspended.remove(&job) {
            alloc.gpus = s.gpus;
            alloc.start = Timestamp(alloc.start.0 + (end.0 - s.since.0).max(0));
        }
        // A slice counts by its fraction of the card.
        let gpus = f64::from(self.held_milli(&alloc)) / 1000.0;
        let gpu_seconds = gpus * end.secs_since(alloc.start) as f64;
        self.usage.add(
            &spec.user,
            gpu_seconds,
            end,
            self.policy.weights.half_life_s,
        );
        self.outcomes.insert(job, state == JobState::Completed);
        // A job that ran to its end says how long this user's jobs really run, for the start
        // predictions of prefetch and delay scheduling (a cancelled or failed one does not).
        if state == JobState::Completed {
            self.runtimes.learn(&spec, end.0 - alloc.start.0);
        }
        Some((spec, alloc))
    }

    /// What a job owes for its allocated time up to `end`: for each GPU, hours held times the
    /// weight of that GPU's type, times the preemptible rate for a `--preemptible` job that
    /// could be preempted (an emergency job, a session or a reservation's job never is, so it
    /// pays the full rate whatever it asked for).
    pub fn charge_for(&self, job: &JobSpec, alloc: &Allocation, end: Timestamp) -> f64 {
        let shielded = job.emergency || job.interactive || job.reservation.is_some();
        let rate = if job.preemptible && !shielded {
            self.policy.credits.preemptible_rate
        } else {
            1.0
        };
        match self.charged_view(job.id, alloc, end) {
            Some((charged, until)) => rate * self.allocation_charge(&charged, until),
            None => rate * self.allocation_charge(alloc, end),
        }
    }

    /// What an allocation's GPU time up to `end` costs at the full rate.
    fn allocation_charge(&self, alloc: &Allocation, end: Timestamp) -> f64 {
        let secs = end.secs_since(alloc.start);
        alloc
            .parts()
            .flat_map(|part| {
                let node = self.nodes.get(part.node);
                part.gpus.iter().map(move |g| {
                    let device = node.and_then(|n| n.spec.gpus.iter().find(|d| d.index == *g));
                    // A slice is charged by its fraction of the card.
                    let part = device
                        .filter(|d| alloc.shared && d.sliced())
                        .map_or(1.0, |d| {
                            f64::from(crate::slice::milli_gpus(d, alloc.held_units())) / 1000.0
                        });
                    (device.map_or("", |d| d.gpu_type.as_str()), part)
                })
            })
            .map(|(ty, part)| part * self.policy.credits.charge(1, ty, secs))
            .fold(0.0, |total, c| total + c)
    }

    /// Credits the user's running jobs have used so far.
    pub fn accrued(&self, user: &str, now: Timestamp) -> f64 {
        self.running
            .values()
            .filter(|(j, _)| j.user == user)
            .map(|(j, a)| self.charge_for(j, a, now))
            // fold from +0.0: an empty f64 sum() is -0.0, which prints as "-0.00".
            .fold(0.0, |total, c| total + c)
    }

    /// A placed job whose datasets were being staged starts now: its time limit, charge and
    /// fair-share usage count from `at`, not from its placement. False when it was not placed.
    pub fn set_started(&mut self, job: JobId, at: Timestamp) -> bool {
        match self.running.get_mut(&job) {
            Some((_, alloc)) => {
                alloc.start = at;
                true
            }
            None => false,
        }
    }

    /// A running job goes back to the queue, keeping its place (its submit time).
    pub fn requeue(&mut self, job: JobId) -> bool {
        let Some((spec, alloc)) = self.running.remove(&job) else {
            return false;
        };
        self.release_nodes(job, &alloc);
        self.suspended.remove(&job);
        if let Some(notice) = self.notices.remove(&job) {
            // It gives way: it may not take back what it was stopped for.
            self.yielding.insert(job, notice.by);
        }
        self.pending.insert(job, spec);
        true
    }
}
