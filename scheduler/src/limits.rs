//! QOS limits in a scheduling pass: what each user, account and array holds right now, and
//! the Slurm-style reason a job waits for when starting it would break a limit.

use crate::job::{JobId, JobSpec};
use crate::policy::Limits;
use crate::reason::PendingReason;
use std::collections::BTreeMap;

/// What is running, counted the ways limits need.
#[derive(Debug, Clone, Default)]
pub struct Holdings {
    user_gpus: BTreeMap<String, u32>,
    user_jobs: BTreeMap<String, u32>,
    account_gpus: BTreeMap<String, u32>,
    array_tasks: BTreeMap<JobId, u32>,
}

impl Holdings {
    /// Counts a running (or just started) job.
    pub fn add(&mut self, job: &JobSpec) {
        *self.user_gpus.entry(job.user.clone()).or_default() += job.resources.gpus;
        *self.user_jobs.entry(job.user.clone()).or_default() += 1;
        if let Some(a) = &job.account {
            *self.account_gpus.entry(a.clone()).or_default() += job.resources.gpus;
        }
        if let Some(t) = &job.array {
            *self.array_tasks.entry(t.array_id).or_default() += 1;
        }
    }

    /// GPUs `user` holds.
    pub fn user_gpus(&self, user: &str) -> u32 {
        self.user_gpus.get(user).copied().unwrap_or(0)
    }
}

/// The reason `job` must wait under `limits` (the tightest of its account's and its user's),
/// or `None` when it may start as far as limits go.
pub fn limit_reason(job: &JobSpec, limits: &Limits, held: &Holdings) -> Option<PendingReason> {
    let user = job.user.as_str();
    if let (Some(max), crate::time::TimeLimit::Seconds(t)) = (limits.max_wall_s, job.time_limit)
        && t > max
    {
        return Some(PendingReason::new(
            "QOSMaxWallDurationPerJobLimit",
            format!(
                "time limit {} is over MaxWall={}; it waits until the limit is raised (or resubmit with --time={})",
                crate::time::format_duration(t),
                crate::time::format_duration(max),
                crate::time::format_duration(max)
            ),
        ));
    }
    if let Some(max) = limits.max_wall_s
        && job.time_limit == crate::time::TimeLimit::Unlimited
    {
        return Some(PendingReason::new(
            "QOSMaxWallDurationPerJobLimit",
            format!(
                "no time limit, but MaxWall={}",
                crate::time::format_duration(max)
            ),
        ));
    }
    if let Some(max) = limits.max_jobs_per_user {
        let running = held.user_jobs.get(user).copied().unwrap_or(0);
        if running >= max {
            return Some(PendingReason::new(
                "QOSMaxJobsPerUserLimit",
                format!("{user} runs {running} jobs; MaxJobsPerUser={max}"),
            ));
        }
    }
    if let Some(max) = limits.max_gpus_per_user {
        let gpus = held.user_gpus(user);
        if gpus + job.resources.gpus > max {
            return Some(PendingReason::new(
                "QOSMaxGRESPerUser",
                format!(
                    "{user} holds {gpus} GPUs and this job asks for {}; MaxTRESPerUser=gres/gpu={max}",
                    job.resources.gpus
                ),
            ));
        }
    }
    if let (Some(max), Some(account)) = (limits.grp_gpus, &job.account) {
        let gpus = held.account_gpus.get(account).copied().unwrap_or(0);
        if gpus + job.resources.gpus > max {
            return Some(PendingReason::new(
                "AssocGrpGRES",
                format!(
                    "account {account} holds {gpus} GPUs and this job asks for {}; GrpTRES=gres/gpu={max}",
                    job.resources.gpus
                ),
            ));
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
