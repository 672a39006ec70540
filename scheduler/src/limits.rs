//! QOS limits in a scheduling pass: what each user, account and array holds right now, and
//! the Slurm-style reason a job waits for when starting it would break a limit.
//!
//! Each limit is counted over the jobs it governs. A user's own limits (`qos set --user`)
//! count all of that user's jobs. An account's per-user limits count the user's jobs in that
//! account only, so running in one group never blocks work in another. `GrpTRES` counts the
//! whole account.
//!
//! GPUs are counted in thousandths, so that a slice counts by its fraction: a quarter of a card
//! is 250 (see [`crate::slice`]); limits stay whole numbers of GPUs.

use crate::job::{JobId, JobSpec};
use crate::policy::Limits;
use crate::reason::PendingReason;
use crate::time::TimeLimit;
use labpool_units::format_elapsed;
use std::collections::BTreeMap;

/// What is running, counted the ways limits need.
#[derive(Debug, Clone, Default)]
pub struct Holdings {
    /// (thousandths of GPUs, jobs) per user, every account together.
    users: BTreeMap<String, (u32, u32)>,
    /// (thousandths of GPUs, jobs) per (account, user).
    members: BTreeMap<(String, String), (u32, u32)>,
    /// Thousandths of GPUs per account.
    account_gpus: BTreeMap<String, u32>,
    array_tasks: BTreeMap<JobId, u32>,
}

impl Holdings {
    /// Counts a running (or just started) job that holds `milli` thousandths of GPUs.
    pub fn add(&mut self, job: &JobSpec, milli: u32) {
        let g = milli;
        let u = self.users.entry(job.user.clone()).or_default();
        *u = (u.0 + g, u.1 + 1);
        if let Some(a) = &job.account {
            let m = self
                .members
                .entry((a.clone(), job.user.clone()))
                .or_default();
            *m = (m.0 + g, m.1 + 1);
            *self.account_gpus.entry(a.clone()).or_default() += g;
        }
        if let Some(t) = &job.array {
            *self.array_tasks.entry(t.array_id).or_default() += 1;
        }
    }

    /// Thousandths of GPUs the jobs of `account` hold.
    pub fn account_milli(&self, account: &str) -> u32 {
        self.account_gpus.get(account).copied().unwrap_or(0)
    }

    /// Thousandths of GPUs `user` holds, in every account.
    pub fn user_milli(&self, user: &str) -> u32 {
        self.users.get(user).map_or(0, |u| u.0)
    }
}

/// Thousandths of GPUs as a number of GPUs: `2`, `1.25`.
pub fn gpus_text(milli: u32) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        let text = format!("{:.3}", f64::from(milli) / 1000.0);
        text.trim_end_matches('0').to_string()
    }
}

fn per_user(
    job: &JobSpec,
    want: u32,
    limits: &Limits,
    held: (u32, u32),
    scope: &str,
) -> Option<PendingReason> {
    let user = &job.user;
    let (gpus, jobs) = held;
    if let Some(max) = limits.max_jobs_per_user
        && jobs >= max
    {
        return Some(PendingReason::new(
            "QOSMaxJobsPerUserLimit",
            format!("{user} runs {jobs} jobs{scope}; MaxJobsPerUser={max}"),
        ));
    }
    if let Some(max) = limits.max_gpus_per_user
        && u64::from(gpus) + u64::from(want) > u64::from(max) * 1000
    {
        return Some(PendingReason::new(
            "QOSMaxGRESPerUser",
            format!(
                "{user} holds {} GPUs{scope} and this job asks for {}; MaxTRESPerUser=gres/gpu={max}",
                gpus_text(gpus),
                gpus_text(want)
            ),
        ));
    }
    None
}

/// The reason `job`, which would hold `want` thousandths of GPUs, must wait under its user's
/// own limits and its account's, or `None` when it may start as far as limits go.
pub fn limit_reason(
    job: &JobSpec,
    want: u32,
    user: &Limits,
    account: Option<&Limits>,
    held: &Holdings,
) -> Option<PendingReason> {
    let wall = account.map_or(user.max_wall_s, |a| user.tightest(a).max_wall_s);
    if let Some(max) = wall {
        let over = match job.time_limit {
            TimeLimit::Seconds(t) => t > max,
            TimeLimit::Unlimited => true,
        };
        if over {
            return Some(PendingReason::new(
                "QOSMaxWallDurationPerJobLimit",
                format!(
                    "time limit {} is over MaxWall={}; it waits until the limit is raised (or resubmit with --time={})",
                    job.time_limit,
                    format_elapsed(max),
                    format_elapsed(max)
                ),
            ));
        }
    }
    let everywhere = held.users.get(&job.user).copied().unwrap_or((0, 0));
    if let Some(r) = per_user(job, want, user, everywhere, "") {
        return Some(r);
    }
    if let (Some(limits), Some(name)) = (account, &job.account) {
        let here = held
            .members
            .get(&(name.clone(), job.user.clone()))
            .copied()
            .unwrap_or((0, 0));
        if let Some(r) = per_user(job, want, limits, here, &format!(" in account {name}")) {
            return Some(r);
        }
        if let Some(max) = limits.grp_gpus {
            let gpus = held.account_gpus.get(name).copied().unwrap_or(0);
            if u64::from(gpus) + u64::from(want) > u64::from(max) * 1000 {
                return Some(PendingReason::new(
                    "AssocGrpGRES",
                    format!(
                        "account {name} holds {} GPUs and this job asks for {}; GrpTRES=gres/gpu={max}",
                        gpus_text(gpus),
                        gpus_text(want)
                    ),
                ));
            }
        }
    }
    if let Some(task) = &job.array
        && let Some(max) = task.throttle
    {
        let running = held.array_tasks.get(&task.array_id).copied().unwrap_or(0);
        if running >= max {
            return Some(PendingReason::new(
                "JobArrayTaskLimit",
                format!(
                    "{running} tasks of array {} run; it allows {max} at once",
                    task.array_id
                ),
            ));
        }
    }
    None
}
