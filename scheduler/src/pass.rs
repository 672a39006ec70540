//! One scheduling pass.
//!
//! 1. Every node gets a profile of its free capacity over time: what is free now, plus what
//!    each running job gives back at its time limit.
//! 2. Waiting jobs are ordered by tier (emergency, in credit, overdrawn), then by the weighted
//!    sum of age, fair-share and partition priority, then by submit time.
//! 3. In that order, each job passes three gates: its dependencies, its QOS limits, and the
//!    placement chain. A job that fits starts now and books its interval in the node's profile;
//!    unless its data is not on that node: then it waits for a node that holds the data (delay
//!    scheduling, `delay.rs`) or, its GPUs not taken, for the copy to that node (a stage-in,
//!    `stage_in.rs`), booked from the copy's expected end.
//! 4. A job that waits for busy resources gets a reservation: the earliest time and node where
//!    it fits for its whole time limit, booked in that profile. A later job may start only
//!    where it fits over its own whole time limit, so it never delays a reservation: that is
//!    conservative backfill, judged by time limits. Share slots of `--gpu-share` jobs are
//!    booked the same way (see [`crate::profile`]): a sharer started later never holds a GPU
//!    that a reservation for a whole job took, nor a slot a reserved sharer needs.
//! 5. Reserved jobs predicted to start within the prefetch horizon get their datasets staged
//!    on the node they are predicted to start on (a gang: on each of its predicted nodes). The
//!    prediction assumes jobs run as long as their users' jobs usually do, not to their
//!    (overestimated) limits.

use crate::cache_view::{CacheView, NoCache};
use crate::dependency::DependencyState;
use crate::job::{Allocation, JobId, JobSpec, Part};
use crate::node::Node;
use crate::placement::{PlacementContext, need_on};
use crate::preempt::give_notice;
use crate::profile::{Capacity, Profile};
use crate::reason::PendingReason;
use crate::scheduler::{Decision, JobNote, Scheduler};
use crate::time::{TimeLimit, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

mod appended;
mod consider;
mod delay;
mod gang;
mod order;
mod reserved;
mod stage_in;
mod victims;

pub(crate) use appended::PassMemo;
use appended::order_key;
use consider::PassState;
pub(crate) use order::PerUser;

impl Scheduler {
    /// One scheduling pass at time `now`, with no dataset cached anywhere.
    pub fn schedule(&mut self, now: Timestamp) -> Vec<Decision> {
        self.schedule_with(now, &NoCache)
    }

    /// One scheduling pass at time `now`, seeing node caches through `cache`.
    pub fn schedule_with(&mut self, now: Timestamp, cache: &dyn CacheView) -> Vec<Decision> {
        self.last_pass = Some(now);
        self.full_passes += 1;
        let told = self.reservation_notices(now);
        let pending = &self.pending;
        self.yielding.retain(|_, by| pending.contains_key(by));
        let expired = self.expire(now);
        let nodes: Vec<&Node> = self.node_order.iter().map(|n| &self.nodes[n]).collect();
        let (index, mut profiles) = starting_profiles(&nodes, now);
        let held = self.running_holdings();
        for (job, alloc) in self.running.values() {
            let end = held_until(self, job, alloc, now);
            for part in alloc.parts() {
                if let Some(&i) = index.get(part.node) {
                    profiles[i].release(end, capacity_of(part, alloc.held_units()));
                }
            }
        }
        self.carve_reservations(&nodes, &mut profiles);
        let (order, per_user) = self.priority_order_with_users(now);
        let mut state = PassState {
            profiles,
            held,
            reservations: Vec::new(),
            failed_shapes: Vec::new(),
            started: Vec::new(),
            stage_ins: Vec::new(),
            preemptible: self.preemptible_at(now, &per_user),
            preempts: Vec::new(),
        };
        let mut notes: BTreeMap<JobId, JobNote> = BTreeMap::new();
        let last_key = order
            .last()
            .map(|(id, f)| order_key(*id, f, &self.pending[id]));
        for (position, (id, factors)) in order.into_iter().enumerate() {
            if let Some(note) = self.consider(id, factors, position, &nodes, &mut state, now, cache)
            {
                notes.insert(id, note);
            }
        }
        let mut decisions = expired;
        decisions.extend(told);
        for (victim, by, cause) in std::mem::take(&mut state.preempts) {
            let cause = cause.to_string();
            decisions.push(give_notice(&mut self.notices, victim, by, cause, now));
        }
        if let Some(horizon) = self.policy.placement.prefetch_horizon_s {
            decisions.extend(self.prefetches(
                now,
                horizon,
                &nodes,
                &state.started,
                &state.reservations,
                cache,
            ));
        }
        for (job, i, datasets) in std::mem::take(&mut state.stage_ins) {
            decisions.push(Decision::StageIn {
                job,
                node: nodes[i].name().to_string(),
                datasets,
            });
        }
        let started = std::mem::take(&mut state.started);
        // After a pass that started jobs, the next one numbers the queue anew: no shortcut.
        let considered = started.is_empty().then_some(notes.len());
        for (id, allocation, stage) in started {
            let job = self.pending.remove(&id).expect("a started job was pending");
            self.hold_nodes(id, &allocation);
            self.reasons.remove(&id);
            self.running.insert(id, (job, allocation.clone()));
            decisions.push(Decision::Start {
                job: id,
                allocation,
                stage,
            });
        }
        decisions.extend(self.waits(&notes));
        self.notes = notes;
        self.memo = Some(PassMemo {
            now,
            state,
            node_order: self.node_order.clone(),
            running: self.running.len(),
            last_key,
            per_user,
            considered,
        });
        self.prune_outcomes();
        decisions
    }

    /// Takes out of the queue the jobs that can no longer end before their `--deadline`.
    fn expire(&mut self, now: Timestamp) -> Vec<Decision> {
        let late: Vec<JobId> = self
            .pending
            .values()
            .filter(|j| j.deadline.is_some_and(|d| now.plus_limit(j.time_limit) > d))
            .map(|j| j.id)
            .collect();
        late.into_iter()
            .map(|job| {
                self.remove_pending(job);
                Decision::Expire { job }
            })
            .collect()
    }

    /// The waits whose reason changed since the last pass told it.
    fn waits(&mut self, notes: &BTreeMap<JobId, JobNote>) -> Vec<Decision> {
        let mut out = Vec::new();
        for (id, note) in notes {
            if self.reasons.get(id) != Some(&note.reason) {
                self.reasons.insert(*id, note.reason.clone());
                out.push(Decision::Wait {
                    job: *id,
                    reason: note.reason.clone(),
                });
            }
        }
        out
    }

    /// Stage-ahead decisions: where and when the reserved jobs are likely to start, judged by
    /// how long jobs really run rather than by their limits (see [`crate::runtime`]), for those
    /// predicted to start within `horizon` seconds.
    fn prefetches(
        &self,
        now: Timestamp,
        horizon: u64,
        nodes: &[&Node],
        started: &[(JobId, Allocation, Vec<String>)],
        reservations: &[(JobId, usize, Timestamp)],
        cache: &dyn CacheView,
    ) -> Vec<Decision> {
        let (index, mut profiles) = starting_profiles(nodes, now);
        let expected_end =
            |job: &JobSpec, start: Timestamp| self.runtimes.expected_end(job, start, now);
        for (job, alloc) in self.running.values() {
            for part in alloc.parts() {
                if let Some(&i) = index.get(part.node) {
                    profiles[i].release(
                        expected_end(job, alloc.start).max(Timestamp(now.0 + 1)),
                        capacity_of(part, alloc.held_units()),
                    );
                }
            }
        }
        self.carve_reservations(nodes, &mut profiles);
        for (id, alloc, _) in started {
            for part in alloc.parts() {
                let i = index[part.node];
                profiles[i].take(
                    now,
                    expected_end(&self.pending[id], now),
                    capacity_of(part, alloc.held_units()),
                );
            }
        }
        let mut out = Vec::new();
        let limit = now.plus_secs(horizon);
        let mut seen = BTreeSet::new();
        for (id, _, _) in reservations {
            let job = &self.pending[id];
            if !seen.insert(*id) {
                continue;
            }
            let Some(partition) = self.partitions.iter().find(|p| p.name == job.partition) else {
                continue;
            };
            let ctx = PlacementContext {
                partition,
                now,
                cache,
            };
            let duration = self.runtimes.expected_runtime_ms(job);
            let until = |at: Timestamp| {
                duration.map_or(Timestamp::NEVER, |d| Timestamp(at.0.saturating_add(d)))
            };
            // A gang is predicted as it is reserved: the first nodes that fit it together.
            let predicted = if job.resources.node_count() > 1 {
                self.earliest_gang(job, nodes, &profiles, &ctx, until)
            } else {
                nodes
                    .iter()
                    .enumerate()
                    .filter(|(i, n)| self.may_take(job, n, &profiles[*i], &ctx))
                    .filter_map(|(i, n)| {
                        profiles[i]
                            .earliest(&need_on(job, n), duration)
                            .map(|(at, c)| (at, i, c))
                    })
                    .min_by_key(|(at, i, _)| (*at, *i))
                    .map(|(at, i, c)| (at, vec![(i, c)]))
            };
            let Some((at, taken)) = predicted else {
                continue;
            };
            for (i, capacity) in &taken {
                profiles[*i].take(at, until(at), *capacity);
            }
            if at > limit {
                continue;
            }
            for (i, _) in taken {
                for dataset in &job.datasets {
                    if cache.cached_bytes(nodes[i].name(), dataset) == 0 {
                        out.push(Decision::Prefetch {
                            job: *id,
                            node: nodes[i].name().to_string(),
                            dataset: dataset.clone(),
                            expected_start: at,
                        });
                    }
                }
            }
        }
        out
    }

    /// Books the earliest time and node at which `job` fits for its whole time limit; for a
    /// gang, the earliest time at which enough nodes fit at once, and all of them.
    fn reserve(
        &self,
        job: &JobSpec,
        nodes: &[&Node],
        profiles: &mut [Profile],
        ctx: &PlacementContext<'_>,
    ) -> Option<(Vec<usize>, Timestamp)> {
        if job.resources.node_count() > 1 {
            return self.reserve_gang(job, nodes, profiles, ctx);
        }
        let duration = match job.time_limit {
            TimeLimit::Unlimited => None,
            TimeLimit::Seconds(s) => Some((s as i64).saturating_mul(1000)),
        };
        let mut best: Option<(Timestamp, usize, Capacity)> = None;
        for (i, node) in nodes.iter().enumerate() {
            if !self.may_take(job, node, &profiles[i], ctx) {
                continue;
            }
            if let Some((at, taken)) = profiles[i].earliest(&need_on(job, node), duration)
                && best.is_none_or(|(b, _, _)| at < b)
            {
                best = Some((at, i, taken));
            }
        }
        let (at, i, taken) = best?;
        profiles[i].take(at, at.plus_limit(job.time_limit), taken);
        Some((vec![i], at))
    }

    /// True when `node` is up and could take `job` once it is free: every static filter
    /// passes. Reservations and stage-ahead predictions look only at such nodes.
    pub(super) fn may_take(
        &self,
        job: &JobSpec,
        node: &Node,
        profile: &Profile,
        ctx: &PlacementContext<'_>,
    ) -> bool {
        node.accepts_jobs()
            && self
                .chain
                .statically_fits(job, &crate::placement::Candidate { node, profile }, ctx)
    }

    /// Why a job may not run under its account, when that changed after it was submitted: the
    /// account was removed, the user left it, or the partition no longer admits it.
    fn account_reason(&self, job: &JobSpec) -> Option<PendingReason> {
        if let Some(name) = &job.account {
            match self.accounts.get(name) {
                None => {
                    return Some(PendingReason::new(
                        "InvalidAccount",
                        format!(
                            "account {name} was removed; cancel and resubmit under another account"
                        ),
                    ));
                }
                Some(a) if !a.members.contains(&job.user) => {
                    return Some(PendingReason::new(
                        "InvalidAccount",
                        format!(
                            "{} is no longer in account {name}; cancel and resubmit, or ask an admin",
                            job.user
                        ),
                    ));
                }
                _ => {}
            }
        }
        let allowed = self
            .partitions
            .iter()
            .find(|p| p.name == job.partition)
            .and_then(|p| p.allow_accounts.as_ref())?;
        if job.account.as_ref().is_some_and(|a| allowed.contains(a)) {
            return None;
        }
        Some(PendingReason::new(
            "InvalidAccount",
            format!(
                "partition {} is only for accounts {}; cancel and resubmit to another partition",
                job.partition,
                allowed.join(", ")
            ),
        ))
    }

    /// Why a job's dependencies keep it waiting, if they do.
    fn dependency_reason(&self, job: &JobSpec) -> Option<PendingReason> {
        let mut waiting = Vec::new();
        for dep in &job.dependencies {
            let ended =
                if self.pending.contains_key(&dep.job) || self.running.contains_key(&dep.job) {
                    None
                } else {
                    match self.outcomes.get(&dep.job) {
                        Some(ok) => Some(*ok),
                        None => {
                            return Some(PendingReason::new(
                                "DependencyNeverSatisfied",
                                format!("{dep}: job {} is not known; cancel this job", dep.job),
                            ));
                        }
                    }
                };
            match dep.state(ended) {
                DependencyState::Satisfied => {}
                DependencyState::Waiting => waiting.push(dep.to_string()),
                DependencyState::Never => {
                    return Some(PendingReason::new(
                        "DependencyNeverSatisfied",
                        format!(
                            "{dep} can no longer be met (job {} ended otherwise); cancel this job",
                            dep.job
                        ),
                    ));
                }
            }
        }
        if job.singleton
            && let Some(earlier) = self.earlier_namesake(job)
        {
            waiting.push(format!("singleton (job {earlier} has its name)"));
        }
        (!waiting.is_empty())
            .then(|| PendingReason::new("Dependency", format!("waits for {}", waiting.join(","))))
    }

    /// The first job before `job` of the same user and name that has not ended, for
    /// `singleton`.
    fn earlier_namesake(&self, job: &JobSpec) -> Option<JobId> {
        let same = |j: &JobSpec| j.id < job.id && j.user == job.user && j.name == job.name;
        let running = self.running.values().map(|(j, _)| j);
        running
            .chain(self.pending.values())
            .filter(|j| same(j))
            .map(|j| j.id)
            .min()
    }

    /// Forgets outcomes no waiting job depends on, once there are many.
    fn prune_outcomes(&mut self) {
        if self.outcomes.len() < 10_000 {
            return;
        }
        let wanted: BTreeSet<JobId> = self
            .pending
            .values()
            .flat_map(|j| j.dependencies.iter().map(|d| d.job))
            .collect();
        self.outcomes.retain(|id, _| wanted.contains(id));
    }
}

/// Until when a running job holds what it holds, as a pass sees it: its time limit, or the
/// end of its grace period when it was told to stop; a job past either is about to be killed,
/// and holds its GPUs until then.
pub(crate) fn held_until(
    sched: &Scheduler,
    job: &JobSpec,
    alloc: &Allocation,
    now: Timestamp,
) -> Timestamp {
    let limit = alloc.start.plus_limit(job.time_limit);
    sched
        .notice_end(job.id)
        .map_or(limit, |n| n.min(limit))
        .max(Timestamp(now.0 + 1))
}

/// Each node's position in `nodes` by name, and its profile starting from what is free now.
fn starting_profiles<'n>(
    nodes: &[&'n Node],
    now: Timestamp,
) -> (BTreeMap<&'n str, usize>, Vec<Profile>) {
    let index = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name(), i))
        .collect();
    let profiles = nodes
        .iter()
        .map(|n| Profile::new(now, n.free_capacity()))
        .collect();
    (index, profiles)
}

/// What `part` of an allocation holds on its node, as an amount: its GPUs whole, or `units`
/// share units of each when `units` > 0.
fn capacity_of(part: Part<'_>, units: u8) -> Capacity {
    let mut c = Capacity {
        gpus: part.gpus.iter().fold(0u64, |m, g| m | (1u64 << g)),
        cpus: part.cpus as i64,
        mem: part.mem_mib as i64,
        ..Capacity::default()
    };
    if units > 0 {
        for g in part.gpus {
            c.shared[*g as usize] = units;
        }
    }
    c
}
