//! Passes that cost what changed. When the only change since the last pass is jobs added to
//! the queue, and each of them sorts after every job that pass saw, a full pass would consider
//! the old jobs exactly as before (nothing freed, nothing moved ahead of them) and only then
//! the new ones. So the new ones are considered alone, against what the last pass booked. The
//! shortcut holds only when none of them can start or take a reservation (those change what
//! the pass tells nodes and what prefetch predicts); otherwise a full pass runs. Both give the
//! same decisions: the shortcut is the full pass at the last pass's `now`, cut short.

use super::consider::PassState;
use super::order::{PerUser, order_cmp};
use crate::cache_view::CacheView;
use crate::job::{JobId, JobSpec};
use crate::node::Node;
use crate::priority::Factors;
use crate::scheduler::{Decision, Scheduler};
use crate::time::Timestamp;

/// What a pass leaves for the next one to continue from.
#[derive(Debug, Clone)]
pub(crate) struct PassMemo {
    /// When it ran: new jobs are ordered as of then.
    pub(crate) now: Timestamp,
    /// What it had booked after its last job.
    pub(crate) state: PassState,
    /// The node order it saw.
    pub(crate) node_order: Vec<String>,
    /// How many jobs ran after it.
    pub(crate) running: usize,
    /// The order key of its last job.
    pub(crate) last_key: Option<OrderKey>,
    /// The per-user factors it ordered by.
    pub(crate) per_user: PerUser,
    /// How many jobs it considered (positions so far); `None` when it started any, since the
    /// next pass then numbers the queue anew.
    pub(crate) considered: Option<usize>,
}

/// A job's place in the pass order, comparable across jobs.
#[derive(Debug, Clone)]
pub(crate) struct OrderKey {
    factors: Factors,
    submit: Timestamp,
    id: JobId,
}

/// The order key of `job` with `factors`.
pub(crate) fn order_key(id: JobId, factors: &Factors, job: &JobSpec) -> OrderKey {
    OrderKey {
        factors: factors.clone(),
        submit: job.submit_time,
        id,
    }
}

impl OrderKey {
    fn cmp(&self, other: &OrderKey) -> std::cmp::Ordering {
        order_cmp(
            (&self.factors, self.submit, self.id),
            (&other.factors, other.submit, other.id),
        )
    }
}

impl Scheduler {
    /// A pass after `added` jobs were queued and nothing else changed (the caller knows: no job
    /// ended, no node, account, limit, balance or cache changed, no time tick). Considers only
    /// the added jobs when that gives what a full pass would; else runs the full pass.
    pub fn schedule_appended(
        &mut self,
        now: Timestamp,
        cache: &dyn CacheView,
        added: &[JobId],
    ) -> Vec<Decision> {
        match self.try_appended(cache, added) {
            Some(decisions) => decisions,
            None => self.schedule_with(now, cache),
        }
    }

    fn try_appended(&mut self, cache: &dyn CacheView, added: &[JobId]) -> Option<Vec<Decision>> {
        let memo = self.memo.as_ref()?;
        let considered = memo.considered?;
        if memo.node_order != self.node_order || memo.running != self.running.len() {
            return None;
        }
        let max_partition = self.max_partition_priority();
        let held = self.running_holdings();
        let mut keyed = Vec::new();
        for id in added {
            let job = self.pending.get(id)?;
            // A user the last pass did not see changes everyone's fair share.
            memo.per_user.get(&job.user)?;
            let factors = self.factors(job, &memo.per_user, &held, max_partition, memo.now);
            keyed.push((order_key(*id, &factors, job), factors));
        }
        keyed.sort_by(|(a, _), (b, _)| a.cmp(b));
        if let (Some(last), Some((first, _))) = (&memo.last_key, keyed.first())
            && first.cmp(last).is_lt()
        {
            return None;
        }
        let nodes: Vec<&Node> = self.node_order.iter().map(|n| &self.nodes[n]).collect();
        let mut state = memo.state.clone();
        let mut notes = Vec::new();
        for (k, (key, factors)) in keyed.iter().enumerate() {
            let (reservations, preempts, holds) = (
                state.reservations.len(),
                state.preempts.len(),
                state.stage_ins.len(),
            );
            let note = self.consider(
                key.id,
                factors.clone(),
                considered + k,
                &nodes,
                &mut state,
                memo.now,
                cache,
            )?;
            if state.reservations.len() != reservations
                || state.preempts.len() != preempts
                || state.stage_ins.len() != holds
            {
                return None;
            }
            notes.push((key.id, note));
        }
        let memo = self.memo.as_mut().expect("checked above");
        memo.state = state;
        memo.considered = Some(considered + notes.len());
        if let Some((key, _)) = keyed.last() {
            memo.last_key = Some(key.clone());
        }
        let notes: std::collections::BTreeMap<_, _> = notes.into_iter().collect();
        let mut decisions = self.waits(&notes);
        self.notes.extend(notes);
        // The jobs the last full pass held for their data are held still: said again, as a
        // full pass says them, so that what they wait for stays pinned.
        for (id, note) in &self.notes {
            if let (Some((node, _)), Some(job)) = (&note.staging_in, self.pending.get(id)) {
                decisions.push(Decision::StageIn {
                    job: *id,
                    node: node.clone(),
                    datasets: cache.lacking(node, &job.datasets),
                });
            }
        }
        Some(decisions)
    }
}
