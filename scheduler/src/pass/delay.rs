//! Delay scheduling with a cost model (after Zaharia et al.'s delay scheduling and Quincy): a
//! job that could start now on a node without its data may instead wait, for a bounded time,
//! for a node that holds it, when the wait plus what is left to copy there is shorter than
//! copying to the free node. The copy times come from the cache view, over the links' current
//! shares; a view that cannot estimate them (`None`) never delays.

use super::consider::PassState;
use crate::cache_view::CacheView;
use crate::job::{JobId, JobSpec};
use crate::node::Node;
use crate::placement::{PlacementContext, need_on};
use crate::reason::PendingReason;
use crate::scheduler::Scheduler;
use crate::time::Timestamp;

/// A decision to wait for a node that holds the data.
pub(crate) struct Delay {
    /// The node waited for (index).
    pub(crate) node: usize,
    /// When it is expected to take the job.
    pub(crate) at: Timestamp,
    /// When the job first waited for its data, for the bound on the whole wait.
    pub(crate) since: Timestamp,
    /// Why, for `why`.
    pub(crate) reason: PendingReason,
}

/// Whether `job` may wait for its data rather than take its GPUs at once, for a node that holds
/// it (delay scheduling) or for a copy (stage-in): a one-node job with data, not an emergency.
/// A gang has its data prefetched on its predicted nodes instead.
pub(crate) fn waits_for_data(job: &JobSpec) -> bool {
    !job.datasets.is_empty() && job.resources.node_count() <= 1 && !job.emergency
}

/// Seconds as whole minutes, rounded up, for people.
fn mins(secs: f64) -> String {
    labpool_units::format_elapsed(((secs.max(0.0) / 60.0).ceil() as u64).max(1) * 60)
}

impl Scheduler {
    /// Whether `job`, which fits now on `chosen`, should wait for a node that holds its data;
    /// when it should, that node is booked for it from the expected time.
    pub(crate) fn delay_for_data(
        &self,
        id: JobId,
        job: &JobSpec,
        chosen: usize,
        nodes: &[&Node],
        state: &mut PassState,
        ctx: &PlacementContext<'_>,
    ) -> Option<Delay> {
        let bound = self.policy.placement.locality_wait_s? as f64;
        if !waits_for_data(job) {
            return None;
        }
        let cache: &dyn CacheView = ctx.cache;
        let here = cache.copy_seconds(nodes[chosen].name(), &job.datasets)?;
        if here <= 0.0 {
            return None;
        }
        // The bound is on the whole wait, from the pass that first made the job wait for its
        // data (the last pass's note; a restart starts it again).
        let since = self
            .notes
            .get(&id)
            .and_then(|n| n.delayed_since)
            .unwrap_or(ctx.now);
        let waited = (ctx.now.0 - since.0).max(0) as f64 / 1000.0;
        let duration = self.runtimes.expected_runtime_ms(job);
        let mut best: Option<(f64, usize, Timestamp, f64)> = None;
        for (i, node) in nodes.iter().enumerate() {
            if i == chosen || !self.may_take(job, node, &state.profiles[i], ctx) {
                continue;
            }
            let Some(there) = cache.copy_seconds(node.name(), &job.datasets) else {
                continue;
            };
            if there >= here {
                continue;
            }
            // A node free now was passed over by placement for a reason of its own (room in
            // its cache, a reservation, packing): waiting for it would never end.
            let Some(at) = self
                .expected_free(job, i, node, duration, state, ctx.now)
                .filter(|at| *at > ctx.now)
            else {
                continue;
            };
            let wait = (at.0 - ctx.now.0).max(0) as f64 / 1000.0;
            let cost = wait + there;
            if waited + wait <= bound && cost < here && best.is_none_or(|(c, _, _, _)| cost < c) {
                best = Some((cost, i, at, wait));
            }
        }
        let (_, i, at, _) = best?;
        if !ctx.cache.has_room(nodes[i].name(), &job.datasets) {
            return None;
        }
        // Booked when the limits allow it then (within the pass's reservations), so that
        // backfill does not take the node. The limits often do not, since the expected end is
        // earlier than the limit: the job then waits unbooked, and the bound on the whole wait
        // (`since`) still ends it.
        let need = need_on(job, nodes[i]);
        let until = at.plus_limit(job.time_limit);
        if state.reservations.len() < self.policy.placement.max_reservations
            && let Some(taken) = state.profiles[i].fits(at, until, &need)
        {
            state.profiles[i].take(at, until, taken);
            state.reservations.push((id, i, at));
        }
        // Names, not times: a time relative to now would rewrite the reason every pass.
        // `why` shows when the node is expected.
        let reason = PendingReason::new(
            "Resources",
            format!(
                "waits for {}, which holds its data, rather than copy it to {} (the wait is shorter than the copy, and at most {})",
                nodes[i].name(),
                nodes[chosen].name(),
                mins(bound)
            ),
        );
        Some(Delay {
            node: i,
            at,
            since,
            reason,
        })
    }

    /// When node `i` is expected to have room for `job`: at once by the pass's profile, else
    /// when enough of its running jobs are expected to end, by their users' learned ratios of
    /// run time to limit (the limits, which backfill keeps to, are far too pessimistic to
    /// weigh a wait against a copy).
    fn expected_free(
        &self,
        job: &JobSpec,
        i: usize,
        node: &Node,
        duration: Option<i64>,
        state: &PassState,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let need = need_on(job, node);
        if let Some((at, _)) = state.profiles[i].earliest(&need, duration)
            && at <= now
        {
            return Some(now);
        }
        let mut free = state.profiles[i].free_now().gpus.count_ones();
        let mut ends: Vec<(Timestamp, u32)> = self
            .running
            .values()
            .flat_map(|(spec, alloc)| {
                alloc
                    .parts()
                    .filter(|p| p.node == node.name())
                    .map(|p| {
                        let end = self.runtimes.expected_end(spec, alloc.start, now);
                        (end, p.gpus.len() as u32)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        ends.sort_unstable();
        for (end, gpus) in ends {
            free += gpus;
            if free >= job.resources.gpus {
                return Some(end.max(now));
            }
        }
        None
    }
}
