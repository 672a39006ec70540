//! Multi-node jobs (gangs) in a pass: their reservation, which books every node they need at
//! one start time, and the TCP ports every placed job is leased.
//!
//! A gang starts on all of its nodes at once or not at all. It is placed only when enough nodes
//! fit now (see [`crate::placement::Chain::place_gang_in`]); otherwise backfill reserves the
//! earliest time at which enough nodes fit together for its whole time limit, and holds all of
//! them, so that smaller jobs backfill around the gang without delaying it.
//!
//! Ports. Each placed job is leased a block of ports, the same numbers on all of its nodes:
//! the first is its `MASTER_PORT`, the second its steps' launcher, then one per task on a node
//! (`TF_CONFIG` workers). A block is never leased to two running jobs at once, so two jobs that
//! share a node never pick the same port, as Slurm's `MpiParams=ports=` does for steps.

use crate::job::{JobSpec, PortBlock};
use crate::node::Node;
use crate::placement::{PlacementContext, need_on};
use crate::profile::{Capacity, Profile};
use crate::scheduler::Scheduler;
use crate::time::{TimeLimit, Timestamp};

/// Ports a job is leased besides one per task: `MASTER_PORT` and the step launcher's.
pub const FIXED_PORTS: u16 = 2;

impl Scheduler {
    /// Books the earliest time at which `job.resources.nodes` nodes fit at once for its whole
    /// time limit: the first nodes in order that fit then.
    pub(super) fn reserve_gang(
        &self,
        job: &JobSpec,
        nodes: &[&Node],
        profiles: &mut [Profile],
        ctx: &PlacementContext<'_>,
    ) -> Option<(Vec<usize>, Timestamp)> {
        let until = |at: Timestamp| match job.time_limit {
            TimeLimit::Unlimited => Timestamp::NEVER,
            TimeLimit::Seconds(_) => at.plus_limit(job.time_limit),
        };
        let (at, fitting) = self.earliest_gang(job, nodes, profiles, ctx, until)?;
        for (i, taken) in &fitting {
            profiles[*i].take(at, until(at), *taken);
        }
        Some((fitting.into_iter().map(|(i, _)| i).collect(), at))
    }

    /// The earliest time `at` at which `job.resources.nodes` of the nodes that may take it fit
    /// it at once until `until(at)`, with the first such nodes in order and what each gives.
    /// The earliest such time is when some node's capacity changes (or now), so only those
    /// times are tried. Reservations judge `until` by time limits, stage-ahead predictions by
    /// how long jobs really run.
    pub(super) fn earliest_gang(
        &self,
        job: &JobSpec,
        nodes: &[&Node],
        profiles: &[Profile],
        ctx: &PlacementContext<'_>,
        until: impl Fn(Timestamp) -> Timestamp,
    ) -> Option<(Timestamp, Vec<(usize, Capacity)>)> {
        let count = job.resources.node_count() as usize;
        let eligible: Vec<usize> = (0..nodes.len())
            .filter(|&i| self.may_take(job, nodes[i], &profiles[i], ctx))
            .collect();
        if eligible.len() < count {
            return None;
        }
        let mut times: Vec<Timestamp> = eligible
            .iter()
            .flat_map(|&i| profiles[i].changes())
            .collect();
        times.sort_unstable();
        times.dedup();
        times.into_iter().find_map(|at| {
            let fitting: Vec<(usize, Capacity)> = eligible
                .iter()
                .filter_map(|&i| {
                    profiles[i]
                        .fits(at, until(at), &need_on(job, nodes[i]))
                        .map(|c| (i, c))
                })
                .take(count)
                .collect();
            (fitting.len() == count).then_some((at, fitting))
        })
    }

    /// The lowest block of ports in the configured range that no running job and no job in
    /// `also` holds, for a job with `tasks` tasks per node; `None` when the range is full.
    pub(super) fn lease_ports(&self, tasks: u32, also: &[Option<PortBlock>]) -> Option<PortBlock> {
        let (lo, hi) = self.policy.placement.ports;
        let count = FIXED_PORTS.saturating_add(tasks.clamp(1, 1024) as u16);
        let mut taken: Vec<PortBlock> = self
            .running
            .values()
            .filter_map(|(_, a)| a.ports)
            .chain(also.iter().flatten().copied())
            .collect();
        taken.sort_unstable_by_key(|b| b.first);
        let mut first = lo as u32;
        for b in &taken {
            if first + count as u32 <= b.first as u32 {
                break;
            }
            first = first.max(b.end());
        }
        (first + count as u32 - 1 <= hi as u32).then_some(PortBlock {
            first: first as u16,
            count,
        })
    }
}
