//! A waiting job that may preempt picks its victims: on one node, the cheapest set of
//! preemptible running jobs whose going lets it start when their grace period ends.
//!
//! Cheapest means the fewest GPU-hours lost (GPUs times time run so far), then the most
//! recent start, then the highest id; a set is pruned of any job it does not need. Nodes are
//! compared by the total lost, then by how many jobs are stopped, then in node order. A job
//! that would fit by then anyway (something ends within the grace period) preempts nothing.

use super::consider::PassState;
use super::{capacity_of, held_until};
use crate::job::{JobId, JobSpec};
use crate::limits::Holdings;
use crate::node::Node;
use crate::placement::{PlacementContext, need_on};
use crate::preempt::Cause;
use crate::priority::{Factors, Tier};
use crate::profile::Profile;
use crate::scheduler::Scheduler;
use crate::time::Timestamp;

/// The jobs to stop for one waiting job, all with a part on the node it will start on.
pub(crate) struct Victims {
    /// The jobs, cheapest first, with why each may be preempted.
    pub(crate) jobs: Vec<(JobId, Cause)>,
}

impl Scheduler {
    /// True when `job` may take GPUs from preemptible jobs: an emergency job, or an in-credit
    /// job that is not preemptible itself and would not borrow. Gangs do not preempt.
    pub(crate) fn may_preempt(&self, job: &JobSpec, factors: &Factors, held: &Holdings) -> bool {
        if !self.policy.preemption.enabled
            || job.resources.node_count() > 1
            || job.reservation.is_some()
        {
            return false;
        }
        match factors.tier {
            Tier::Emergency => true,
            Tier::InCredit => !job.preemptible && !self.would_borrow(job, held),
            Tier::Overdrawn => false,
        }
    }

    /// True when starting `job` would take its account beyond its `GrpTRES` share.
    pub(crate) fn would_borrow(&self, job: &JobSpec, held: &Holdings) -> bool {
        let Some(account) = job.account.as_deref() else {
            return false;
        };
        self.accounts
            .get(account)
            .and_then(|a| a.limits.grp_gpus)
            .is_some_and(|share| {
                u64::from(held.account_milli(account)) + u64::from(self.asked_milli(job))
                    > u64::from(share) * 1000
            })
    }

    /// The cheapest victims that let `job` start at the end of the grace period, if any do and
    /// it would not fit by then without them.
    pub(crate) fn choose_victims(
        &self,
        job: &JobSpec,
        nodes: &[&Node],
        state: &PassState,
        ctx: &PlacementContext<'_>,
    ) -> Option<Victims> {
        let now = ctx.now;
        let at = now.plus_secs(self.policy.preemption.grace_s);
        let until = at.plus_limit(job.time_limit);
        let mut best: Option<(u128, usize, Victims)> = None;
        for (i, node) in nodes.iter().enumerate() {
            let profile = &state.profiles[i];
            if !self.may_take(job, node, profile, ctx) {
                continue;
            }
            let need = need_on(job, node);
            if profile.fits(at, until, &need).is_some() {
                return None;
            }
            let mut candidates: Vec<(u128, Timestamp, JobId)> = state
                .preemptible
                .keys()
                .filter_map(|id| {
                    let (victim, alloc) = &self.running[id];
                    alloc.is_on(node.name()).then(|| {
                        let lost = u128::from(victim.resources.total_gpus())
                            * now.0.saturating_sub(alloc.start.0).max(0) as u128;
                        (lost, alloc.start, *id)
                    })
                })
                .collect();
            candidates.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
            let fits = |chosen: &[JobId]| {
                let mut p = profile.clone();
                for id in chosen {
                    self.shorten(*id, node.name(), at, now, &mut p);
                }
                p.fits(at, until, &need).is_some()
            };
            let mut chosen: Vec<JobId> = Vec::new();
            for (_, _, id) in &candidates {
                chosen.push(*id);
                if fits(&chosen) {
                    break;
                }
            }
            if chosen.is_empty() || !fits(&chosen) {
                continue;
            }
            // Drop the dearest jobs the set does not need.
            for k in (0..chosen.len()).rev() {
                let mut without = chosen.clone();
                without.remove(k);
                if !without.is_empty() && fits(&without) {
                    chosen = without;
                }
            }
            let lost: u128 = chosen
                .iter()
                .map(|id| candidates.iter().find(|c| c.2 == *id).map_or(0, |c| c.0))
                .sum();
            let victims = Victims {
                jobs: chosen
                    .iter()
                    .map(|id| (*id, state.preemptible[id].clone()))
                    .collect(),
            };
            let better = best.as_ref().is_none_or(|(l, n, _)| {
                (lost, victims.jobs.len()) < (*l, *n) // node order breaks ties
            });
            if better {
                best = Some((lost, victims.jobs.len(), victims));
            }
        }
        best.map(|(_, _, v)| v)
    }

    /// In `profile` of `node`, the part of running job `id` there comes back at `at` instead
    /// of when the pass expected it.
    pub(crate) fn shorten(
        &self,
        id: JobId,
        node: &str,
        at: Timestamp,
        now: Timestamp,
        profile: &mut Profile,
    ) {
        let (job, alloc) = &self.running[&id];
        let end = held_until(self, job, alloc, now);
        for part in alloc.parts().filter(|p| p.node == node) {
            profile.give(at, end, capacity_of(part, alloc.held_units()));
        }
        self.carve_node(node, profile);
    }
}
