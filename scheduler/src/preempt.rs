//! Preemption: which running jobs may be stopped to give their GPUs back, and why.
//!
//! Three kinds of running job are preemptible, once they have run for the policy's minimum
//! runtime and have no notice yet:
//! - it asked for it (`--preemptible`, charged at a lower rate);
//! - it is borrowing: its account holds more GPUs than its `GrpTRES` share, and this job is
//!   beyond the share counting the account's jobs in the order they started (the latest
//!   starters borrow, as in Kueue's cohorts);
//! - its user is overdrawn (no credit left this month, running charges counted).
//!
//! Never preempted: emergency jobs, interactive sessions, and in-credit jobs within their
//! account's share. The classification is recomputed every pass from the books, so it needs
//! no stored mark and stays deterministic.
//!
//! Who may take GPUs from them (see [`crate::pass`]): an emergency job, or an in-credit job
//! that is not itself preemptible and would not borrow.

use crate::job::{Allocation, JobId, JobSpec};
use crate::pass::PerUser;
use crate::scheduler::Scheduler;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Why a running job may be preempted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Cause {
    /// It asked to be (`--preemptible`).
    Asked,
    /// It runs beyond its account's share.
    Borrowing {
        /// The account.
        account: String,
    },
    /// Its user has no credit left.
    Overdrawn {
        /// The user.
        user: String,
    },
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Asked => write!(f, "submitted --preemptible"),
            Cause::Borrowing { account } => {
                write!(f, "borrowing beyond account {account}'s GrpTRES share")
            }
            Cause::Overdrawn { user } => write!(f, "{user} is overdrawn"),
        }
    }
}

/// A notice given to a running job: it is stopped after the grace period and requeued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// The job that takes its GPUs.
    pub by: JobId,
    /// When the notice was given.
    pub at: Timestamp,
    /// Why it could be preempted, in words.
    pub cause: String,
}

impl Scheduler {
    /// Running jobs beyond their account's `GrpTRES` share: for each account with a share,
    /// its jobs in start order (then id), those whose GPUs go past the share.
    pub fn borrowing(&self) -> BTreeSet<JobId> {
        let mut by_account: BTreeMap<&str, Vec<(Timestamp, JobId, u32)>> = BTreeMap::new();
        for (job, alloc) in self.running.values() {
            if let Some(a) = job.account.as_deref() {
                by_account.entry(a).or_default().push((
                    alloc.start,
                    job.id,
                    job.resources.total_gpus(),
                ));
            }
        }
        let mut out = BTreeSet::new();
        for (account, mut jobs) in by_account {
            let Some(share) = self.accounts.get(account).and_then(|a| a.limits.grp_gpus) else {
                continue;
            };
            jobs.sort();
            let mut used = 0u32;
            for (_, id, gpus) in jobs {
                used += gpus;
                if used > share {
                    out.insert(id);
                }
            }
        }
        out
    }

    /// Why a running job could be preempted, whatever its runtime: `None` for a job that may
    /// never be (emergency, interactive, in credit within its share).
    pub(crate) fn cause(
        &self,
        job: &JobSpec,
        borrowing: &BTreeSet<JobId>,
        per_user: &PerUser,
    ) -> Option<Cause> {
        if job.emergency || job.interactive || job.reservation.is_some() {
            return None;
        }
        if job.preemptible {
            return Some(Cause::Asked);
        }
        if borrowing.contains(&job.id) {
            return Some(Cause::Borrowing {
                account: job.account.clone().unwrap_or_default(),
            });
        }
        let balance = per_user
            .get(&job.user)
            .map_or_else(|| self.balance(&job.user), |(_, b)| *b);
        (balance <= 0.0).then(|| Cause::Overdrawn {
            user: job.user.clone(),
        })
    }

    /// The running jobs that may be preempted at `now`, with why: past their minimum runtime
    /// and not already told to stop. Empty when preemption is off.
    pub(crate) fn preemptible_at(
        &self,
        now: Timestamp,
        per_user: &PerUser,
    ) -> BTreeMap<JobId, Cause> {
        let p = &self.policy.preemption;
        if !p.enabled {
            return BTreeMap::new();
        }
        let borrowing = self.borrowing();
        self.running
            .values()
            .filter(|(job, alloc)| {
                !self.notices.contains_key(&job.id) && past_min_runtime(alloc, now, p.min_runtime_s)
            })
            .filter_map(|(job, _)| Some((job.id, self.cause(job, &borrowing, per_user)?)))
            .collect()
    }

    /// Why a running job may be preempted (now, or once past its minimum runtime), as `why`
    /// shows it: `None` when it may not be, or preemption is off.
    pub fn preemptible_cause(&self, job: JobId, now: Timestamp) -> Option<Cause> {
        let (spec, _) = self.running.get(&job)?;
        if !self.policy.preemption.enabled {
            return None;
        }
        let balance = self.balance(&spec.user) - self.accrued(&spec.user, now);
        let per_user = PerUser::from([(spec.user.clone(), (0.0, balance))]);
        self.cause(spec, &self.borrowing(), &per_user)
    }

    /// The notice a running job was given, if any.
    pub fn notice(&self, job: JobId) -> Option<&Notice> {
        self.notices.get(&job)
    }

    /// Every notice given to a job still running, by job.
    pub fn notices(&self) -> &BTreeMap<JobId, Notice> {
        &self.notices
    }

    /// Tells the scheduler a running job was given a notice (reloaded after a restart): it
    /// counts its GPUs free from the end of the grace period.
    pub fn restore_notice(&mut self, job: JobId, notice: Notice) {
        if self.running.contains_key(&job) {
            self.notices.insert(job, notice);
        }
    }

    /// Tells the scheduler a waiting job was preempted for `by` (reloaded after a restart): it
    /// waits until `by` has started or left the queue.
    pub fn restore_yielding(&mut self, job: JobId, by: JobId) {
        if self.pending.contains_key(&job) {
            self.yielding.insert(job, by);
        }
    }

    /// When a noticed job's GPUs come back: the end of its grace period.
    pub(crate) fn notice_end(&self, job: JobId) -> Option<Timestamp> {
        self.notices
            .get(&job)
            .map(|n| n.at.plus_secs(self.policy.preemption.grace_s))
    }
}

/// True when the allocation has run at least `min_runtime_s` at `now`.
fn past_min_runtime(alloc: &Allocation, now: Timestamp, min_runtime_s: u64) -> bool {
    now.secs_since(alloc.start) >= min_runtime_s
}

/// Records in `notices` that running job `job` is told to stop for `by` (job 0: a reservation)
/// at `now`, and returns the decision that says so: a pass counts its GPUs free from the end of
/// the grace period.
pub(crate) fn give_notice(
    notices: &mut BTreeMap<JobId, Notice>,
    job: JobId,
    by: JobId,
    cause: String,
    now: Timestamp,
) -> crate::scheduler::Decision {
    let notice = Notice {
        by,
        at: now,
        cause: cause.clone(),
    };
    notices.insert(job, notice);
    crate::scheduler::Decision::Preempt { job, by, cause }
}
