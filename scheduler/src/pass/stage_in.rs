//! Stage-in: a job that fits now on a node without its data waits, its GPUs not taken, while
//! the data is copied there, and takes them when the copy ends (as Slurm's burst buffers stage
//! a job's files in before it is allocated). The GPUs stay free meanwhile for jobs that end
//! before the copy does, and no GPU time is spent waiting for data.
//!
//! The node is booked from when the copy is expected to end, so backfill does not take it for
//! longer; the job keeps that node across passes while the copy runs, and the hold is bounded
//! (`stage_in_wait_s`): past it, or when the copy cannot be made (no room, the node gone), the
//! job is placed as usual and waits for the rest of its data on its GPUs.

use super::consider::PassState;
use crate::job::{JobId, JobSpec};
use crate::node::Node;
use crate::placement::{PlacementContext, need_on};
use crate::reason::PendingReason;
use crate::scheduler::Scheduler;
use crate::time::Timestamp;

/// A decision to hold a job while its data is copied.
pub(crate) struct StageIn {
    /// The node its data is copied to (index).
    pub(crate) node: usize,
    /// When the copy is expected to end.
    pub(crate) at: Timestamp,
    /// When the hold began, for its bound.
    pub(crate) since: Timestamp,
    /// Why, for `why`.
    pub(crate) reason: PendingReason,
}

impl Scheduler {
    /// Whether `job`, which fits now on `chosen`, should wait without GPUs while its data is
    /// copied: to `chosen`, or to the node an earlier pass began copying it to.
    pub(crate) fn stage_in(
        &self,
        id: JobId,
        job: &JobSpec,
        chosen: usize,
        nodes: &[&Node],
        state: &mut PassState,
        ctx: &PlacementContext<'_>,
    ) -> Option<StageIn> {
        let bound = self.policy.placement.stage_in_wait_s? as i64 * 1000;
        if !super::delay::waits_for_data(job)
            || !ctx.cache.lacks(nodes[chosen].name(), &job.datasets)
        {
            return None;
        }
        // The node an earlier pass began copying to, while the copy runs and the node may
        // still take the job. Else the node placement chose now: the first node is gone, or
        // its copy ended and placement passed it over (taken meanwhile, and delay scheduling
        // judged a copy here shorter than the wait there).
        let prior = self.notes.get(&id).and_then(|n| n.staging_in.as_ref());
        let kept = prior.and_then(|(name, _)| {
            let i = nodes.iter().position(|n| n.name() == name)?;
            (ctx.cache.lacks(name, &job.datasets)
                && self.may_take(job, nodes[i], &state.profiles[i], ctx))
            .then_some(i)
        });
        let node = kept.unwrap_or(chosen);
        let since = prior.map_or(ctx.now, |(_, since)| *since);
        let name = nodes[node].name();
        if !ctx.cache.lacks(name, &job.datasets) || ctx.now.0 - since.0 >= bound {
            return None;
        }
        if kept.is_none() && !ctx.cache.has_room(name, &job.datasets) {
            return None;
        }
        let lacking = ctx.cache.lacking(name, &job.datasets);
        // Booked from the copy's expected end (now, when the view cannot tell), so that
        // backfill takes the node only for jobs that end before then.
        let left = ctx.cache.copy_seconds(name, &job.datasets).unwrap_or(0.0);
        let at = Timestamp(ctx.now.0 + (left.max(0.0) * 1000.0).ceil() as i64);
        let need = need_on(job, nodes[node]);
        let until = at.plus_limit(job.time_limit);
        if let Some(taken) = state.profiles[node].fits(at, until, &need) {
            state.profiles[node].take(at, until, taken);
        }
        state.stage_ins.push((id, node, lacking.clone()));
        // Names, not times: a time relative to now would rewrite the reason every pass.
        let reason = PendingReason::new(
            crate::reason::STAGE_IN,
            format!(
                "its data ({}) is being copied to {name}; it takes its GPUs there when the copy ends",
                lacking.join(", ")
            ),
        );
        Some(StageIn {
            node,
            at,
            since,
            reason,
        })
    }
}
