//! One scheduling pass.
//!
//! 1. Every node gets a profile of its free capacity over time: what is free now, plus what
//!    each running job gives back at its time limit.
//! 2. Waiting jobs are ordered by tier (emergency, in credit, overdrawn), then by the weighted
//!    sum of age, fair-share and partition priority, then by submit time.
//! 3. In that order, each job passes three gates: its dependencies, its QOS limits, and the
//!    placement chain. A job that fits starts now and books its interval in the node's profile.
//! 4. A job that waits for busy resources gets a reservation: the earliest time and node where
//!    it fits for its whole time limit, booked in that profile. A later job may start only
//!    where it fits over its own whole time limit, so it never delays a reservation: that is
//!    conservative backfill, judged by time limits. Share slots of `--gpu-share` jobs are
//!    booked the same way (see [`crate::profile`]): a sharer started later never holds a GPU
//!    that a reservation for a whole job took, nor a slot a reserved sharer needs.
//! 5. Reserved jobs predicted to start within the prefetch horizon get their datasets staged
//!    on the node they are predicted to start on. The prediction assumes jobs run as long as
//!    their users' jobs usually do, not to their (overestimated) limits.

use crate::cache_view::{CacheView, NoCache};
use crate::dependency::DependencyState;
use crate::job::{Allocation, JobId, JobSpec};
use crate::limits::{Holdings, limit_reason};
use crate::node::Node;
use crate::placement::{PlacementContext, Rejections, need_on};
use crate::priority::{Factors, Tier, age_factor, fairshare_factor, weighted};
use crate::profile::{Capacity, Profile};
use crate::reason::PendingReason;
use crate::scheduler::{Decision, JobNote, Scheduler};
use crate::time::{TimeLimit, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// What a job asks of placement; jobs with the same shape fail the same way in one pass.
type Shape<'a> = (&'a str, u32, Option<&'a str>, bool, u32, u64, TimeLimit);

impl Scheduler {
    /// One scheduling pass at time `now`, with no dataset cached anywhere.
    pub fn schedule(&mut self, now: Timestamp) -> Vec<Decision> {
        self.schedule_with(now, &NoCache)
    }

    /// One scheduling pass at time `now`, seeing node caches through `cache`.
    pub fn schedule_with(&mut self, now: Timestamp, cache: &dyn CacheView) -> Vec<Decision> {
        self.last_pass = Some(now);
        let nodes: Vec<&Node> = self.node_order.iter().map(|n| &self.nodes[n]).collect();
        let (index, mut profiles) = starting_profiles(&nodes, now);
        let mut held = Holdings::default();
        for (job, alloc) in self.running.values() {
            held.add(job);
            if let Some(&i) = index.get(alloc.node.as_str()) {
                // A job past its limit is about to be killed; until then its GPUs stay held.
                let end = alloc
                    .start
                    .plus_limit(job.time_limit)
                    .max(Timestamp(now.0 + 1));
                profiles[i].release(end, capacity_of(alloc));
            }
        }

        let order = self.priority_order_at(now);
        let mut decisions = Vec::new();
        let mut notes: BTreeMap<JobId, JobNote> = BTreeMap::new();
        let mut started: Vec<(JobId, Allocation, Vec<String>)> = Vec::new();
        let mut reservations: Vec<(JobId, usize, Timestamp)> = Vec::new();
        let mut failed_shapes: BTreeMap<Shape<'_>, (PendingReason, Rejections)> = BTreeMap::new();
        for (position, (id, factors)) in order.into_iter().enumerate() {
            let job = &self.pending[&id];
            let note = |stage: &str, reason: PendingReason| JobNote {
                factors: factors.clone(),
                position: position + 1,
                stage: stage.to_string(),
                reason,
                rejections: None,
                reservation: None,
            };
            if let Some(reason) = self.dependency_reason(job) {
                notes.insert(id, note("dependency", reason));
                continue;
            }
            if let Some(reason) = self.account_reason(job) {
                notes.insert(id, note("account", reason));
                continue;
            }
            let user_limits = self.user_limits.get(&job.user).cloned().unwrap_or_default();
            let account_limits = job
                .account
                .as_ref()
                .and_then(|a| self.accounts.get(a))
                .map(|a| &a.limits);
            if let Some(reason) = limit_reason(job, &user_limits, account_limits, &held) {
                notes.insert(id, note("limits", reason));
                continue;
            }
            let Some(partition) = self.partitions.iter().find(|p| p.name == job.partition) else {
                let reason = PendingReason::new(
                    "PartitionDown",
                    format!(
                        "partition {} is no longer configured; cancel and resubmit",
                        job.partition
                    ),
                );
                notes.insert(id, note("placement", reason));
                continue;
            };
            let r = &job.resources;
            let shape: Shape<'_> = (
                &job.partition,
                r.gpus,
                r.gpu_type.as_deref(),
                r.gpu_share,
                r.cpus,
                r.mem_mib,
                job.time_limit,
            );
            if let Some((reason, rejections)) = failed_shapes.get(&shape) {
                let mut n = note("placement", reason.clone());
                n.rejections = Some(rejections.clone());
                notes.insert(id, n);
                continue;
            }
            let ctx = PlacementContext {
                partition,
                now,
                cache,
            };
            match self.chain.place_in(job, &nodes, &profiles, &ctx) {
                Ok(choice) => {
                    let node = nodes[choice.index];
                    let allocation = Allocation {
                        start: now,
                        node: node.name().to_string(),
                        gpus: choice.gpus,
                        cpus: r.cpus,
                        mem_mib: r.mem_mib,
                        shared: r.gpu_share && r.gpus > 0,
                    };
                    profiles[choice.index].take(
                        now,
                        now.plus_limit(job.time_limit),
                        capacity_of(&allocation),
                    );
                    held.add(job);
                    let stage: Vec<String> = job
                        .datasets
                        .iter()
                        .filter(|d| cache.cached_bytes(node.name(), d) == 0)
                        .cloned()
                        .collect();
                    started.push((id, allocation, stage));
                }
                Err(rejections) => {
                    let reservation = if !rejections.busy_nodes.is_empty()
                        && reservations.len() < self.policy.placement.max_reservations
                    {
                        self.reserve(job, &nodes, &mut profiles, &ctx)
                    } else {
                        None
                    };
                    let holders: Vec<(String, u64)> = reservations
                        .iter()
                        .filter(|(_, i, _)| rejections.busy_nodes.contains(i))
                        .map(|(j, i, _)| (nodes[*i].name().to_string(), j.0))
                        .collect();
                    let mut reason = PendingReason::from_rejections(&rejections, &holders);
                    if let Some((i, at)) = reservation {
                        // The node, not the time: a time relative to now would change the
                        // reason (and rewrite it) on every pass. `why` shows the time.
                        reason
                            .detail
                            .push_str(&format!("; reserved on {}", nodes[i].name()));
                        reservations.push((id, i, at));
                    } else {
                        failed_shapes.insert(shape, (reason.clone(), rejections.clone()));
                    }
                    let mut n = note("placement", reason);
                    n.reservation = reservation.map(|(i, at)| (nodes[i].name().to_string(), at));
                    n.rejections = Some(rejections);
                    notes.insert(id, n);
                }
            }
        }

        if let Some(horizon) = self.policy.placement.prefetch_horizon_s {
            decisions.extend(self.prefetches(now, horizon, &nodes, &started, &reservations, cache));
        }

        for (id, allocation, stage) in started {
            let job = self.pending.remove(&id).expect("a started job was pending");
            self.nodes
                .get_mut(&allocation.node)
                .expect("placed on a known node")
                .hold(id, &allocation);
            self.reasons.remove(&id);
            self.running.insert(id, (job, allocation.clone()));
            decisions.push(Decision::Start {
                job: id,
                allocation,
                stage,
            });
        }
        for (id, note) in &notes {
            if self.reasons.get(id) != Some(&note.reason) {
                self.reasons.insert(*id, note.reason.clone());
                decisions.push(Decision::Wait {
                    job: *id,
                    reason: note.reason.clone(),
                });
            }
        }
        self.notes = notes;
        self.prune_outcomes();
        decisions
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
            if let Some(&i) = index.get(alloc.node.as_str()) {
                profiles[i].release(
                    expected_end(job, alloc.start).max(Timestamp(now.0 + 1)),
                    capacity_of(alloc),
                );
            }
        }
        for (id, alloc, _) in started {
            let i = index[alloc.node.as_str()];
            profiles[i].take(
                now,
                expected_end(&self.pending[id], now),
                capacity_of(alloc),
            );
        }
        let mut out = Vec::new();
        let limit = now.plus_secs(horizon);
        for (id, _, _) in reservations {
            let job = &self.pending[id];
            let Some(partition) = self.partitions.iter().find(|p| p.name == job.partition) else {
                continue;
            };
            let ctx = PlacementContext {
                partition,
                now,
                cache,
            };
            let duration = self.runtimes.expected_runtime_ms(job);
            let best = nodes
                .iter()
                .enumerate()
                .filter(|(i, n)| {
                    n.accepts_jobs()
                        && self.chain.statically_fits(
                            job,
                            &crate::placement::Candidate {
                                node: n,
                                profile: &profiles[*i],
                            },
                            &ctx,
                        )
                })
                .filter_map(|(i, n)| {
                    profiles[i]
                        .earliest(&need_on(job, n), duration)
                        .map(|(at, c)| (at, i, c))
                })
                .min_by_key(|(at, i, _)| (*at, *i));
            let Some((at, i, taken)) = best else { continue };
            let expected_end =
                duration.map_or(Timestamp::NEVER, |d| Timestamp(at.0.saturating_add(d)));
            profiles[i].take(at, expected_end, taken);
            if at > limit {
                continue;
            }
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
        out
    }

    /// Books the earliest time and node at which `job` fits for its whole time limit.
    fn reserve(
        &self,
        job: &JobSpec,
        nodes: &[&Node],
        profiles: &mut [Profile],
        ctx: &PlacementContext<'_>,
    ) -> Option<(usize, Timestamp)> {
        let duration = match job.time_limit {
            TimeLimit::Unlimited => None,
            TimeLimit::Seconds(s) => Some((s as i64).saturating_mul(1000)),
        };
        let mut best: Option<(Timestamp, usize, Capacity)> = None;
        for (i, node) in nodes.iter().enumerate() {
            let candidate = crate::placement::Candidate {
                node,
                profile: &profiles[i],
            };
            if !node.accepts_jobs() || !self.chain.statically_fits(job, &candidate, ctx) {
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
        Some((i, at))
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
        (!waiting.is_empty())
            .then(|| PendingReason::new("Dependency", format!("waits for {}", waiting.join(","))))
    }

    /// Waiting jobs in the order a pass considers them, with their priority factors.
    pub fn priority_order_at(&self, now: Timestamp) -> Vec<(JobId, Factors)> {
        let w = &self.policy.weights;
        let max_partition = self
            .partitions
            .iter()
            .map(|p| p.priority)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let users: BTreeSet<&str> = self
            .usage
            .users()
            .chain(self.pending.values().map(|j| j.user.as_str()))
            .chain(self.running.values().map(|(j, _)| j.user.as_str()))
            .collect();
        // Usage so far of running jobs counts too: a user on 8 GPUs for three days is not light.
        let mut running_use: BTreeMap<&str, f64> = BTreeMap::new();
        for (job, alloc) in self.running.values() {
            *running_use.entry(job.user.as_str()).or_insert(0.0) +=
                alloc.gpus.len() as f64 * now.secs_since(alloc.start) as f64;
        }
        let usage_of = |user: &str| {
            self.usage.decayed(user, now, w.half_life_s)
                + running_use.get(user).copied().unwrap_or(0.0)
        };
        let total: f64 = users.iter().map(|u| usage_of(u)).sum();
        let mut per_user: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for user in &users {
            let fairshare = fairshare_factor(usage_of(user), total, users.len());
            let balance = self.balance(user) - self.accrued(user, now);
            per_user.insert(user, (fairshare, balance));
        }
        let mut order: Vec<(JobId, Factors, Timestamp)> = self
            .pending
            .values()
            .map(|job| {
                let (fairshare, balance) = per_user[job.user.as_str()];
                let tier = if job.emergency {
                    Tier::Emergency
                } else if balance > 0.0 {
                    Tier::InCredit
                } else {
                    Tier::Overdrawn
                };
                let partition = self
                    .partitions
                    .iter()
                    .find(|p| p.name == job.partition)
                    .map_or(0.0, |p| p.priority as f64)
                    / max_partition;
                let age = age_factor(job.submit_time, now, w.max_age_s);
                let priority = weighted(w, age, fairshare, partition);
                (
                    job.id,
                    Factors {
                        tier,
                        age,
                        fairshare,
                        partition,
                        priority,
                        balance,
                    },
                    job.submit_time,
                )
            })
            .collect();
        order.sort_by(|(a_id, a, a_t), (b_id, b, b_t)| {
            a.tier
                .cmp(&b.tier)
                .then(b.priority.total_cmp(&a.priority))
                .then(a_t.cmp(b_t))
                .then(a_id.cmp(b_id))
        });
        order.into_iter().map(|(id, f, _)| (id, f)).collect()
    }

    /// Waiting jobs in the order a pass would consider them at `now`.
    pub fn priority_order(&self, now: Timestamp) -> Vec<JobId> {
        self.priority_order_at(now)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
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

/// What `alloc` holds, as an amount: its GPUs whole, or one share slot of each.
fn capacity_of(alloc: &Allocation) -> Capacity {
    let mut c = Capacity {
        gpus: alloc.gpus.iter().fold(0u64, |m, g| m | (1u64 << g)),
        cpus: alloc.cpus as i64,
        mem: alloc.mem_mib as i64,
        ..Capacity::default()
    };
    if alloc.shared {
        for g in &alloc.gpus {
            c.shared[*g as usize] = 1;
        }
    }
    c
}
