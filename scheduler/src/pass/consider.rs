//! One waiting job's turn in a pass: its dependencies, its limits, then placement, and a
//! reservation when it waits for busy resources.

use crate::cache_view::CacheView;
use crate::job::{Allocation, HoldBy, JobId, JobSpec, NodeShare, Part};
use crate::limits::{Holdings, limit_reason};
use crate::node::Node;
use crate::placement::{PlacementContext, Rejections};
use crate::priority::Factors;
use crate::profile::Profile;
use crate::reason::PendingReason;
use crate::scheduler::{JobNote, Scheduler};
use crate::time::{TimeLimit, Timestamp};

/// What a job asks of placement; jobs with the same shape fail the same way in one pass.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shape {
    partition: String,
    nodes: u32,
    gpus: u32,
    gpu_type: Option<String>,
    share: bool,
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
            .map(|a| &a.limits);
        if let Some(reason) = limit_reason(job, &user_limits, account_limits, &state.held) {
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
        let r = &job.resources;
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
        let count = r.node_count() as usize;
        match self
            .chain
            .place_gang_in(job, count, nodes, &state.profiles, &ctx)
        {
            Ok(choices) => {
                let parts: Vec<NodeShare> = choices
                    .into_iter()
                    .map(|choice| {
                        let node = nodes[choice.index];
                        state.profiles[choice.index].take(
                            now,
                            now.plus_limit(job.time_limit),
                            super::capacity_of(
                                Part {
                                    node: node.name(),
                                    gpus: &choice.gpus,
                                    cpus: r.cpus,
                                    mem_mib: r.mem_mib,
                                },
                                r.gpu_share && r.gpus > 0,
                            ),
                        );
                        NodeShare {
                            node: node.name().to_string(),
                            gpus: choice.gpus,
                            cpus: r.cpus,
                            mem_mib: r.mem_mib,
                        }
                    })
                    .collect();
                let leased: Vec<_> = state.started.iter().map(|(_, a, _)| a.ports).collect();
                let mut parts = parts.into_iter();
                let first = parts.next().expect("a placement has a node");
                let allocation = Allocation {
                    start: now,
                    node: first.node,
                    gpus: first.gpus,
                    cpus: r.cpus,
                    mem_mib: r.mem_mib,
                    shared: r.gpu_share && r.gpus > 0,
                    others: parts.collect(),
                    ports: self.lease_ports(r.cpus, &leased),
                };
                state.held.add(job);
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
                None
            }
            Err(rejections) => {
                let reservation = if !rejections.busy_nodes.is_empty()
                    && state.reservations.len() < self.policy.placement.max_reservations
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
                let reserved = reservation.map(|(on, at)| {
                    let names: Vec<String> =
                        on.iter().map(|i| nodes[*i].name().to_string()).collect();
                    (on, crate::hostlist::compress(&names), at)
                });
                if let Some((on, names, at)) = &reserved {
                    // The nodes, not the time: a time relative to now would change the
                    // reason (and rewrite it) on every pass. `why` shows the time.
                    reason.detail.push_str(&format!("; reserved on {names}"));
                    state.reservations.extend(on.iter().map(|i| (id, *i, *at)));
                } else {
                    state
                        .failed_shapes
                        .push((Shape::of(job), reason.clone(), rejections.clone()));
                }
                let mut n = note("placement", reason);
                n.reservation = reserved.map(|(_, names, at)| (names, at));
                n.rejections = Some(rejections);
                Some(n)
            }
        }
    }
}
