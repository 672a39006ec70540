//! The order a pass considers waiting jobs in: tier (emergency, in credit, overdrawn), then
//! the weighted sum of age, fair-share and partition priority, then submit time, then id.

use crate::job::{JobId, JobSpec};
use crate::limits::Holdings;
use crate::priority::{Factors, Tier, age_factor, fairshare_factor, weighted};
use crate::scheduler::Scheduler;
use crate::time::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// Each user's (fair-share factor, balance net of what their running jobs accrued) at a pass.
pub(crate) type PerUser = BTreeMap<String, (f64, f64)>;

impl Scheduler {
    /// Waiting jobs in the order a pass considers them, with their priority factors.
    pub fn priority_order_at(&self, now: Timestamp) -> Vec<(JobId, Factors)> {
        self.priority_order_with_users(now).0
    }

    /// Waiting jobs in the order a pass would consider them at `now`.
    pub fn priority_order(&self, now: Timestamp) -> Vec<JobId> {
        self.priority_order_at(now)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }

    /// The order, and the per-user factors it was computed from.
    pub(crate) fn priority_order_with_users(
        &self,
        now: Timestamp,
    ) -> (Vec<(JobId, Factors)>, PerUser) {
        let w = &self.policy.weights;
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
                alloc.gpu_count() as f64 * now.secs_since(alloc.start) as f64;
        }
        let usage_of = |user: &str| {
            self.usage.decayed(user, now, w.half_life_s)
                + running_use.get(user).copied().unwrap_or(0.0)
        };
        let total: f64 = users.iter().map(|u| usage_of(u)).sum();
        let mut per_user = PerUser::new();
        for user in &users {
            let fairshare = fairshare_factor(usage_of(user), total, users.len());
            let balance = self.balance(user) - self.accrued(user, now);
            per_user.insert(user.to_string(), (fairshare, balance));
        }
        let max_partition = self.max_partition_priority();
        let held = self.running_holdings();
        let mut order: Vec<(JobId, Factors, Timestamp)> = self
            .pending
            .values()
            .map(|job| {
                let f = self.factors(job, &per_user, &held, max_partition, now);
                (job.id, f, job.submit_time)
            })
            .collect();
        order.sort_by(|(a_id, a, a_t), (b_id, b, b_t)| {
            order_cmp((a, *a_t, *a_id), (b, *b_t, *b_id))
        });
        let order = order.into_iter().map(|(id, f, _)| (id, f)).collect();
        (order, per_user)
    }

    /// The highest partition priority (at least 1), that partition factors are relative to.
    pub(crate) fn max_partition_priority(&self) -> f64 {
        self.partitions
            .iter()
            .map(|p| p.priority)
            .max()
            .unwrap_or(0)
            .max(1) as f64
    }

    /// A waiting job's priority factors at `now`, from its user's factors.
    pub(crate) fn factors(
        &self,
        job: &JobSpec,
        per_user: &PerUser,
        held: &Holdings,
        max_partition: f64,
        now: Timestamp,
    ) -> Factors {
        let w = &self.policy.weights;
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
        Factors {
            tier,
            age,
            fairshare,
            partition,
            priority,
            balance,
            borrows: self.may_borrow(job) && self.would_borrow(job, held),
        }
    }
}

impl Scheduler {
    /// True when `job`'s account is open to borrowing beyond its `GrpTRES` share
    /// (`BorrowLimit`, with preemption on to take borrowed GPUs back).
    fn may_borrow(&self, job: &JobSpec) -> bool {
        self.policy.preemption.enabled
            && job
                .account
                .as_deref()
                .and_then(|a| self.accounts.get(a))
                .is_some_and(|a| a.limits.grp_gpus.is_some() && a.limits.borrow_gpus.is_some())
    }

    /// What the running jobs hold, counted the ways limits need.
    pub fn running_holdings(&self) -> Holdings {
        let mut held = Holdings::default();
        for (job, alloc) in self.running.values() {
            held.add(job, self.held_milli(alloc));
        }
        held
    }
}

/// The pass order between two waiting jobs: (factors, submit time, id) each.
pub(crate) fn order_cmp(
    (a, a_t, a_id): (&Factors, Timestamp, JobId),
    (b, b_t, b_id): (&Factors, Timestamp, JobId),
) -> std::cmp::Ordering {
    a.tier
        .cmp(&b.tier)
        .then(a.borrows.cmp(&b.borrows))
        .then(b.priority.total_cmp(&a.priority))
        .then(a_t.cmp(&b_t))
        .then(a_id.cmp(&b_id))
}
