//! One waiting job's turn in a pass: its dependencies, its limits, then placement, and a
//! reservation when it waits for busy resources.

use crate::cache_view::CacheView;
use crate::job::{Allocation, HoldBy, JobId, JobSpec, NodeShare, Part};
use crate::limits::{Holdings, limit_reason};
use crate::node::Node;
use crate::placement::{PlacementContext, Rejections};
use crate::preempt::Cause;
use crate::priority::Factors;
use crate::profile::Profile;
use crate::reason::PendingReason;
use crate::scheduler::{JobNote, Scheduler};
use crate::time::{TimeLimit, Timestamp};
use std::collections::BTreeMap;

/// What a job asks of placement; jobs with the same shape fail the same way in one pass.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shape {
    partition: String,
    nodes: u32,
    gpus: u32,
    gpu_type: Option<String>,
    share: bool,
    slice: Option<crate::slice::Slice>,
    cpus: u32,
    mem_mib: u64,
    time_limit: TimeLimit,
}

impl Shape {
    fn of(job: &JobSpec) -> Shape {
        let r = &job.resources;
        Shape {
            partition: job.partition.clone(),
            nodes: r.node_count(),
            gpus: r.gpus,
            gpu_type: r.gpu_type.clone(),
            share: r.gpu_share,
            slice: r.slice,
            cpus: r.cpus,
            mem_mib: r.mem_mib,
            time_limit: job.time_limit,
        }
    }

    /// Compared field by field, so that looking a job up allocates nothing.
    fn is_of(&self, job: &JobSpec) -> bool {
        let r = &job.resources;
        self.gpus == r.gpus
            && self.nodes == r.node_count()
            && self.cpus == r.cpus
            && self.mem_mib == r.mem_mib
            && self.share == r.gpu_share
            && self.slice == r.slice
            && self.time_limit == job.time_limit
            && self.partition == job.partition
            && self.gpu_type == r.gpu_type
    }
}

/// What a pass has booked so far, as it goes down the queue.
#[derive(Debug, Clone)]
pub(crate) struct PassState {
    /// Each node's free capacity over time, in node order.
    pub(crate) profiles: Vec<Profile>,
    /// What runs, and what this pass started, counted for limits.
    pub(crate) held: Holdings,
    /// (job, node index, time) of each reservation made.
    pub(crate) reservations: Vec<(JobId, usize, Timestamp)>,
    /// Shapes that failed without a reservation, with why (a pass sees few shapes).
    pub(crate) failed_shapes: Vec<(Shape, PendingReason, Rejections)>,
    /// Jobs placed: (job, allocation, datasets to stage).
    pub(crate) started: Vec<(JobId, Allocation, Vec<String>)>,
    /// Jobs held while their data is copied: (job, node index, datasets it lacks).
    pub(crate) stage_ins: Vec<(JobId, usize, Vec<String>)>,
    /// Running jobs that may still be chosen as victims, with why.
    pub(crate) preemptible: BTreeMap<JobId, Cause>,
    /// Victims chosen: (victim, the waiting job it makes room for, why).
    pub(crate) preempts: Vec<(JobId, JobId, Cause)>,
}

impl Scheduler {
    /// Job `id`'s turn at `position` in the order: placed (booked in `state`, `None`), or the
    /// note that says why it waits.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn consider(
        &self,
        id: JobId,
        factors: Factors,
        position: usize,
        nodes: &[&Node],
        state: &mut PassState,
        now: Timestamp,
        cache: &dyn CacheView,
    ) -> Option<JobNote> {
        let job = &self.pending[&id];
        let note = |stage: &str, reason: PendingReason| JobNote {
            factors: factors.clone(),
            position: position + 1,
            stage: stage.to_string(),
            reason,
            rejections: None,
            reservation: None,
            preempting: Vec::new(),
            delayed_since: None,
            staging_in: None,
        };
        if let Some(hold) = job.hold {
            let id = job.id.0;
            let detail = match hold {
                HoldBy::User => format!("held; `labpool release {id}` lets it run"),
                HoldBy::Admin => {
                    format!("held by an admin; an admin releases it with `labpool release {id}`")
                }
            };
            return Some(note("hold", PendingReason::new(hold.reason(), detail)));
        }
        if let Some(begin) = job.begin
            && begin > now
        {
            let reason = PendingReason::new(
                "BeginTime",
                format!(
                    "may not start before its --begin time (`labpool show {}` says when)",
                    job.id.0
                ),
            );
            return Some(note("begin", reason));
        }
        if let Some(by) = self.yielding.get(&id) {
            let reason = PendingReason::new(
                "Preempted",
                format!(
                    "was preempted for job {}; it runs again once that job has started",
                    by.0
                ),
            );
            return Some(note("preempted", reason));
        }
        if let Some(reason) = self.dependency_reason(job) {
            return Some(note("dependency", reason));
        }
        if let Some(reason) = self.account_reason(job) {
            return Some(note("account", reason));
        }
        let user_limits = self.user_limits.get(&job.user).cloned().unwrap_or_default();
        let account_limits = job
            .account
            .as_ref()
            .and_then(|a| self.accounts.get(a))
            .map(|a| self.with_borrowing(&a.limits));
        let want = self.asked_milli(job);
        if let Some(reason) = limit_reason(
            job,
            want,
            &user_limits,
            account_limits.as_ref(),
            &state.held,
        ) {
            return Some(note("limits", reason));
        }
        if let Some(reason) = self.lend_reason(job, nodes, state) {
            return Some(note("limits", reason));
        }
        let Some(partition) = self.partitions.iter().find(|p| p.name == job.partition) else {
            let reason = PendingReason::new(
                "PartitionDown",
                format!(
                    "partition {} is no longer configured; cancel and resubmit",
                    job.partition
                ),
            );
            return Some(note("placement", reason));
        };
        if let Some(name) = &job.reservation {
            let reason = self.start_in_reservation(id, job, name, nodes, state, now, cache)?;
            return Some(note("reservation", reason));
        }
        if let Some((_, reason, rejections)) =
            state.failed_shapes.iter().find(|(s, _, _)| s.is_of(job))
        {
            let mut n = note("placement", reason.clone());
            n.rejections = Some(rejections.clone());
            return Some(n);
        }
        let ctx = PlacementContext {
            partition,
            now,
            cache,
        };
        let count = job.resources.node_count() as usize;
        // A job that would borrow, or asked to be preemptible, takes only idle GPUs: it books
        // nothing ahead, so that it never stands in the way of a job that may take GPUs back
        // from borrowers; it may use reserved GPUs until shortly before their window.
        let opportunistic = self.policy.preemption.enabled
            && (job.preemptible || self.would_borrow(job, &state.held));
        let uncarved = opportunistic
            .then(|| self.uncarved(nodes, &state.profiles, now))
            .flatten();
        match self.chain.place_gang_in(
            job,
            count,
            nodes,
            uncarved.as_deref().unwrap_or(&state.profiles),
            &ctx,
        ) {
            Ok(choices) => {
                if let [only] = choices.as_slice()
                    && !opportunistic
                {
                    if let Some(delay) =
                        self.delay_for_data(id, job, only.index, nodes, state, &ctx)
                    {
                        let mut n = note("placement", delay.reason);
                        n.reservation = Some((nodes[delay.node].name().to_string(), delay.at));
                        n.delayed_since = Some(delay.since);
                        return Some(n);
                    }
                    if let Some(hold) = self.stage_in(id, job, only.index, nodes, state, &ctx) {
                        let name = nodes[hold.node].name().to_string();
                        let mut n = note("stage-in", hold.reason);
                        n.reservation = Some((name.clone(), hold.at));
                        n.staging_in = Some((name, hold.since));
                        return Some(n);
                    }
                }
                let parts = choices.into_iter().map(|c| (c.index, c.gpus)).collect();
                self.start_on(id, job, parts, nodes, state, now, cache);
                None
            }
            Err(rejections) => {
                let preempting = self.preempt_for(id, job, &factors, nodes, state, &ctx);
                let reservation = if (!opportunistic
                    && !rejections.busy_nodes.is_empty()
                    && state.reservations.len() < self.policy.placement.max_reservations)
                    || !preempting.is_empty()
                {
                    self.reserve(job, nodes, &mut state.profiles, &ctx)
                } else {
                    None
                };
                let holders: Vec<(String, u64)> = state
                    .reservations
                    .iter()
                    .filter(|(_, i, _)| rejections.busy_nodes.contains(i))
                    .map(|(j, i, _)| (nodes[*i].name().to_string(), j.0))
                    .collect();
                let mut reason = PendingReason::from_rejections(&rejections, &holders);
                if opportunistic {
                    reason.detail.push_str(if job.preemptible {
                        "; a preemptible job runs only on idle GPUs"
                    } else {
                        "; beyond its account's share it runs only on idle GPUs"
                    });
                }
                let reserved = reservation.map(|(on, at)| {
                    let names: Vec<String> =
                        on.iter().map(|i| nodes[*i].name().to_string()).collect();
                    (on, crate::hostlist::compress(&names), at)
                });
                if !preempting.is_empty() {
                    let list: Vec<String> = preempting
                        .iter()
                        .map(|(j, why)| format!("job {} ({why})", j.0))
                        .collect();
                    reason.detail.push_str(&format!(
                        "; preempting {} (grace {}s)",
                        list.join(", "),
                        self.policy.preemption.grace_s
                    ));
                } else if job.emergency
                    && let Some((_, _, at)) = &reserved
                {
                    // Nothing to preempt: say when it is expected to start, to the minute.
                    let mins = (at.0.saturating_sub(now.0).max(0) + 59_999) / 60_000;
                    reason.detail.push_str(&format!(
                        "; nothing is preemptible, expected to start within {}",
                        labpool_units::format_elapsed(mins as u64 * 60)
                    ));
                }
                if let Some((on, names, at)) = &reserved {
                    // The nodes, not the time: a time relative to now would change the
                    // reason (and rewrite it) on every pass. `why` shows the time.
                    reason.detail.push_str(&format!("; reserved on {names}"));
                    state.reservations.extend(on.iter().map(|i| (id, *i, *at)));
                } else if !opportunistic {
                    // An opportunistic job's failure says nothing of one that may book ahead.
                    state
                        .failed_shapes
                        .push((Shape::of(job), reason.clone(), rejections.clone()));
                }
                let mut n = note("placement", reason);
                n.reservation = reserved.map(|(_, names, at)| (names, at));
                n.rejections = Some(rejections);
                n.preempting = preempting;
                Some(n)
            }
        }
    }
}

impl Scheduler {
    /// Starts `job` now on `parts` (node index, GPUs), the first its batch node: books them in
    /// the pass's profiles and limits, leases its ports, and records the start with the
    /// datasets some node of it lacks.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_on(
        &self,
        id: JobId,
        job: &JobSpec,
        parts: Vec<(usize, Vec<u32>)>,
        nodes: &[&Node],
        state: &mut PassState,
        now: Timestamp,
        cache: &dyn CacheView,
    ) {
        let r = &job.resources;
        let shared = r.shares_gpus();
        // A sharer holds the same units on each of its GPUs: what its first GPU takes.
        let units = match parts.first() {
            Some((index, gpus)) if shared => gpus
                .first()
                .and_then(|g| nodes[*index].spec.gpus.iter().find(|d| d.index == *g))
                .map_or(1, |d| crate::slice::units_on(r, d).max(1)),
            _ => 0,
        };
        let mut shares = parts.into_iter().map(|(index, gpus)| {
            let node = nodes[index];
            let part = Part {
                node: node.name(),
                gpus: &gpus,
                cpus: r.cpus,
                mem_mib: r.mem_mib,
            };
            state.profiles[index].take(
                now,
                now.plus_limit(job.time_limit),
                super::capacity_of(part, units),
            );
            NodeShare {
                node: node.name().to_string(),
                gpus,
                cpus: r.cpus,
                mem_mib: r.mem_mib,
            }
        });
        let first = shares.next().expect("a placement has a node");
        let others: Vec<NodeShare> = shares.collect();
        let leased: Vec<_> = state.started.iter().map(|(_, a, _)| a.ports).collect();
        let allocation = Allocation {
            start: now,
            node: first.node,
            gpus: first.gpus,
            cpus: r.cpus,
            mem_mib: r.mem_mib,
            shared,
            units: units.max(1),
            others,
            ports: self.lease_ports(r.cpus, &leased),
        };
        state.held.add(job, self.held_milli(&allocation));
        // What some node of the allocation lacks.
        let stage: Vec<String> = job
            .datasets
            .iter()
            .filter(|d| {
                allocation
                    .node_names()
                    .iter()
                    .any(|n| cache.cached_bytes(n, d) == 0)
            })
            .cloned()
            .collect();
        state.started.push((id, allocation, stage));
    }

    /// An account's limits with its borrowing: its `GrpTRES` share plus what it may borrow,
    /// when preemption can take borrowed GPUs back.
    fn with_borrowing(&self, limits: &crate::policy::Limits) -> crate::policy::Limits {
        let mut out = limits.clone();
        if let (true, Some(share), Some(borrow)) = (
            self.policy.preemption.enabled,
            limits.grp_gpus,
            limits.borrow_gpus,
        ) {
            out.grp_gpus = Some(share.saturating_add(borrow));
        }
        out
    }

    /// Why a job that would borrow must wait: the idle GPUs it would take are what other
    /// accounts keep for themselves (the part of their unused share they do not lend).
    fn lend_reason(
        &self,
        job: &JobSpec,
        nodes: &[&Node],
        state: &PassState,
    ) -> Option<PendingReason> {
        if !self.would_borrow(job, &state.held) {
            return None;
        }
        let mut kept = 0u32;
        let mut keepers = Vec::new();
        for (name, account) in &self.accounts {
            if Some(name) == job.account.as_ref() {
                continue;
            }
            if let (Some(share), Some(lend)) = (account.limits.grp_gpus, account.limits.lend_gpus) {
                let keep = share
                    .saturating_sub(lend)
                    .saturating_sub(state.held.account_milli(name) / 1000);
                if keep > 0 {
                    kept += keep;
                    keepers.push(format!("{name} keeps {keep}"));
                }
            }
        }
        if kept == 0 {
            return None;
        }
        let idle: u32 = nodes
            .iter()
            .zip(&state.profiles)
            .filter(|(n, _)| n.accepts_jobs())
            .map(|(_, p)| p.free_now().gpus.count_ones())
            .sum();
        let want = job.resources.total_gpus();
        (idle < want + kept).then(|| {
            PendingReason::new(
                "AssocGrpGRES",
                format!(
                    "account {} is at its GrpTRES share and may borrow only GPUs others lend: {idle} idle, {} ({}; LendLimit)",
                    job.account.as_deref().unwrap_or_default(),
                    keepers.join(", "),
                    if keepers.len() == 1 { "kept" } else { "kept in all" }
                ),
            )
        })
    }

    /// For a waiting job that did not fit: the jobs told to stop for it, with why. Those told
    /// in an earlier pass, or new victims chosen now when it may preempt (their GPUs are then
    /// free in the pass's profiles from the end of their grace period).
    fn preempt_for(
        &self,
        id: JobId,
        job: &JobSpec,
        factors: &Factors,
        nodes: &[&Node],
        state: &mut PassState,
        ctx: &PlacementContext<'_>,
    ) -> Vec<(JobId, String)> {
        let told: Vec<(JobId, String)> = self
            .notices
            .iter()
            .filter(|(_, n)| n.by == id)
            .map(|(v, n)| (*v, n.cause.clone()))
            .collect();
        if !told.is_empty() || !self.may_preempt(job, factors, &state.held) {
            return told;
        }
        let Some(victims) = self.choose_victims(job, nodes, state, ctx) else {
            return Vec::new();
        };
        let at = ctx.now.plus_secs(self.policy.preemption.grace_s);
        let mut out = Vec::new();
        for (victim, cause) in victims.jobs {
            let (_, alloc) = &self.running[&victim];
            for part in alloc.parts() {
                if let Some(i) = nodes.iter().position(|n| n.name() == part.node) {
                    self.shorten(victim, part.node, at, ctx.now, &mut state.profiles[i]);
                }
            }
            state.preemptible.remove(&victim);
            out.push((victim, cause.to_string()));
            state.preempts.push((victim, id, cause));
        }
        out
    }
}
