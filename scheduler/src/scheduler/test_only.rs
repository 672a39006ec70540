//! `sbatch --test-only`: where and when a job would start, from the pool as it stands, without
//! queueing it. The pass runs on a copy of the scheduler, so nothing the real one decides or
//! remembers changes, and the answer is the daemon's own pass, not a second model of it.

use super::Scheduler;
use crate::Decision;
use crate::cache_view::CacheView;
use crate::job::{JobId, JobSpec};
use crate::placement::Chain;
use crate::reason::PendingReason;
use crate::time::Timestamp;

/// Where and when a job would start.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Prediction {
    /// When: now, or the start of the reservation the pass made for it.
    pub start: Option<Timestamp>,
    /// On which node (a gang's nodes, in Slurm's compressed form), when known.
    pub node: Option<String>,
    /// Why it would not start now, when it would not.
    pub reason: Option<PendingReason>,
}

impl Clone for Scheduler {
    /// A copy with the same books; its placement chain is built anew from the same policy.
    fn clone(&self) -> Scheduler {
        Scheduler {
            partitions: self.partitions.clone(),
            policy: self.policy.clone(),
            chain: Chain::for_policy(&self.policy.placement),
            nodes: self.nodes.clone(),
            node_order: self.node_order.clone(),
            pending: self.pending.clone(),
            running: self.running.clone(),
            reasons: self.reasons.clone(),
            notes: self.notes.clone(),
            accounts: self.accounts.clone(),
            user_limits: self.user_limits.clone(),
            balances: self.balances.clone(),
            usage: self.usage.clone(),
            runtimes: self.runtimes.clone(),
            outcomes: self.outcomes.clone(),
            last_pass: self.last_pass,
            memo: self.memo.clone(),
            full_passes: self.full_passes,
            notices: self.notices.clone(),
            yielding: self.yielding.clone(),
            reservations: self.reservations.clone(),
            suspended: self.suspended.clone(),
        }
    }
}

impl Scheduler {
    /// Where and when `job` would start if it were queued now: a full pass over a copy with
    /// it queued. Its id must be one no job has.
    pub fn test_only(&self, now: Timestamp, cache: &dyn CacheView, job: JobSpec) -> Prediction {
        let id = job.id;
        let mut copy = self.clone();
        copy.enqueue(job);
        let decisions = copy.schedule_with(now, cache);
        for d in &decisions {
            if let Decision::Start {
                job, allocation, ..
            } = d
                && *job == id
            {
                return Prediction {
                    start: Some(now),
                    node: Some(allocation.nodelist()),
                    reason: None,
                };
            }
        }
        let note = copy.explain(id);
        let reservation = note.and_then(|n| n.reservation.clone());
        Prediction {
            start: reservation.as_ref().map(|(_, t)| *t),
            node: reservation.map(|(n, _)| n),
            reason: copy.pending_reason(JobId(id.0)).cloned(),
        }
    }
}
