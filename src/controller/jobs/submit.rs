//! Submitting jobs: checks that change nothing when they fail, then one transaction for the
//! batch. A submit can make several jobs (an array), spend an emergency token, and wait on
//! other jobs.

use crate::api::{SubmitRequest, Submitted};
use crate::clock::month_of;
use crate::controller::db::Db;
use crate::controller::engine::Engine;
use crate::controller::error::ApiError;
use crate::controller::jobs::{JobRow, NewJob};
use crate::identity::{Caller, user_name};
use labpool_lifecycle::JobLife;
use labpool_scheduler::admission::AdmitRequest;
use labpool_scheduler::array::parse_array;
use labpool_scheduler::credits::{Entry, EntryKind, NoTokens};
use labpool_scheduler::dependency::{Dependency, parse_dependencies};
use labpool_scheduler::job::ArrayTask;
use labpool_scheduler::options::check_name;
use labpool_scheduler::{JobId, JobSpec, JobState, Resources, TimeLimit, Timestamp};
use sqlx::{Sqlite, Transaction};
use tokio::sync::oneshot;

/// A submit waiting for its batch.
pub(crate) type SubmitItem = (
    Box<SubmitRequest>,
    Caller,
    oneshot::Sender<Result<Submitted, ApiError>>,
);

/// A submit that passed every check.
struct Accepted {
    partition: String,
    time_limit: TimeLimit,
    account: Option<String>,
    tasks: Option<(Vec<u32>, Option<u32>)>,
    dependencies: Vec<Dependency>,
}

pub(crate) fn resources_of(req: &SubmitRequest) -> Resources {
    Resources {
        gpus: req.gpus,
        gpu_type: req.gpu_type.clone(),
        cpus: req.cpus,
        mem_mib: req.mem_mib,
        gpu_share: req.gpu_share,
    }
}

impl Engine {
    /// Queues a batch of submits in the batch's transaction, which the flush commits with
    /// their placements; the replies wait for that commit. Each is checked against the state
    /// the earlier ones of the batch left, so limits and tokens hold across the batch.
    pub(crate) async fn submit(&mut self, batch: Vec<SubmitItem>) -> anyhow::Result<()> {
        let now = self.clock.now_ms();
        let mut tx = match self.batch_tx.take() {
            Some(tx) => tx,
            None => self.db.begin().await?,
        };
        for (req, caller, reply) in batch {
            let accepted = match self.check_submit(&req, &caller).await? {
                Ok(a) => a,
                Err(e) => {
                    self.outbox.reply(reply, Err(e));
                    continue;
                }
            };
            let mut req = req;
            if !accepted.dependencies.is_empty() {
                let list: Vec<String> = accepted
                    .dependencies
                    .iter()
                    .map(|d| d.to_string())
                    .collect();
                req.dependency = Some(list.join(","));
            }
            let ids = self.insert(&mut tx, &req, &caller, &accepted, now).await?;
            self.refresh_balance(&caller.user);
            if req.emergency {
                let entry = Entry {
                    time: Timestamp(now),
                    user: caller.user.clone(),
                    kind: EntryKind::EmergencyToken,
                    amount: 0.0,
                    job: ids.first().copied(),
                    note: Some(format!("job {}", ids[0])),
                };
                Db::append_ledger(&mut tx, &entry).await?;
                tracing::info!(user = %caller.user, job = ids[0], "emergency token spent");
                // Counted now, so a second emergency submit in this batch sees it.
                self.ledger.push(entry);
            }
            let submitted = Submitted {
                job_id: ids[0],
                job_ids: ids,
                partition: accepted.partition,
                time_limit: accepted.time_limit,
                account: accepted.account,
                warnings: Vec::new(),
            };
            self.outbox.reply(reply, Ok(submitted));
        }
        self.batch_tx = Some(tx);
        Ok(())
    }

    async fn check_submit(
        &mut self,
        req: &SubmitRequest,
        caller: &Caller,
    ) -> anyhow::Result<Result<Accepted, ApiError>> {
        let bad = |msg: String, hint: Option<&str>| {
            Ok(Err(ApiError::bad_request(msg, hint.map(str::to_string))))
        };
        if self.controller_uid != 0 && caller.uid != self.controller_uid {
            let me = user_name(self.controller_uid);
            return Ok(Err(ApiError::forbidden(
                format!(
                    "this controller runs as {me}, not root, so it runs only {me}'s jobs; {} cannot submit here",
                    caller.user
                ),
                Some("run `labpool serve` as root to serve every user".to_string()),
            )));
        }
        if !req.workdir.is_absolute() {
            return bad(
                format!("workdir {} is not an absolute path", req.workdir.display()),
                None,
            );
        }
        if let Err(e) = check_name(&req.name) {
            return bad(e.to_string(), None);
        }
        if !req.script.starts_with("#!") {
            return bad(
                "the script does not start with '#!'".into(),
                Some("add an interpreter line such as #!/bin/bash"),
            );
        }
        if req.cpus == 0 {
            return bad("cpus must be at least 1".into(), None);
        }
        if req.gpus == 0 && req.gpu_type.is_some() {
            return bad(
                "gpu_type is set but gpus is 0".into(),
                Some("ask for --gpus TYPE:N"),
            );
        }
        for d in &req.datasets {
            if let Err(e) = labpool_cache::registry::check_name(d) {
                return bad(e.to_string(), None);
            }
            if !self.data.datasets.contains_key(d) {
                let hint = crate::controller::datasets::registry::registered_hint(
                    self.data.datasets.keys().map(String::as_str),
                );
                return Ok(Err(ApiError::bad_request(
                    format!("unknown dataset {d:?}"),
                    Some(hint),
                )));
            }
        }
        // Data larger than every node's cache could never be staged: refused now, not queued
        // forever.
        if let Some(largest) = self.data.caches.values().map(|c| c.capacity).max() {
            let mut total = 0;
            for d in &req.datasets {
                let current = self.data.datasets[d].current.clone();
                total += self.data.manifest(d, &current).map_or(0, |m| m.bytes());
            }
            if total > largest {
                return bad(
                    format!(
                        "the job's datasets ({}) hold {}, more than the largest node cache ({})",
                        req.datasets.join(", "),
                        labpool_units::format_size(total),
                        labpool_units::format_size(largest)
                    ),
                    Some("ask an admin to raise capacity under [cache], or split the dataset"),
                );
            }
        }
        let tasks = match req.array.as_deref().map(parse_array).transpose() {
            Ok(t) => t.map(|a| (a.tasks, a.throttle)),
            Err(e) => return bad(e.to_string(), None),
        };
        if tasks.is_some() && req.emergency {
            return bad(
                "an emergency job cannot be an array".into(),
                Some("spend the token on the one job that must run first"),
            );
        }
        let dependencies = match req
            .dependency
            .as_deref()
            .map(parse_dependencies)
            .transpose()
        {
            Ok(d) => d.unwrap_or_default(),
            Err(e) => return bad(e.to_string(), None),
        };
        // As in Slurm, a dependency on an array's id is on every one of its tasks.
        let mut expanded = Vec::new();
        for dep in &dependencies {
            let tasks = self.db.array_tasks(dep.job.0).await?;
            if tasks.len() > 1 {
                expanded.extend(tasks.into_iter().map(|(id, _)| Dependency {
                    kind: dep.kind,
                    job: JobId(id),
                }));
            } else {
                expanded.push(*dep);
            }
        }
        let dependencies = expanded;
        for dep in &dependencies {
            if self.jobs.contains(dep.job.0) {
                continue;
            }
            match self.db.job_state(dep.job.0).await? {
                // The scheduler learns outcomes as jobs end; a job that ended before this
                // controller started is learnt here.
                Some(state) => self
                    .sched
                    .note_outcome(dep.job, state == JobState::Completed),
                None => {
                    return bad(
                        format!("--dependency {dep}: there is no job {}", dep.job),
                        Some("`labpool queue` and `labpool history` list jobs"),
                    );
                }
            }
        }
        let resources = resources_of(req);
        let count = tasks.as_ref().map_or(1, |(t, _)| t.len() as u32);
        let admit = AdmitRequest {
            user: &caller.user,
            account: req.account.as_deref(),
            partition: req.partition.as_deref(),
            time_limit: req.time_limit,
            resources: &resources,
            emergency: req.emergency,
            count,
        };
        let admitted = match self.sched.admit(&admit) {
            Ok(a) => a,
            Err(e) => return Ok(Err(ApiError::bad_request(e.to_string(), e.hint()))),
        };
        if req.emergency && self.summary(&caller.user).tokens_left == 0 {
            let (_, _, _, reset) = month_of(self.clock.now_ms());
            let e = NoTokens {
                user: caller.user.clone(),
                allowed: self.sched.policy().credits.emergency_tokens,
                reset,
            };
            return Ok(Err(ApiError::bad_request(
                e.to_string(),
                Some("submit it without --emergency; it waits its turn".to_string()),
            )));
        }
        Ok(Ok(Accepted {
            partition: admitted.partition,
            time_limit: admitted.time_limit,
            account: admitted.account,
            tasks,
            dependencies,
        }))
    }

    /// Inserts the job (or each task) and queues it. Returns the new ids.
    async fn insert(
        &mut self,
        tx: &mut Transaction<'static, Sqlite>,
        req: &SubmitRequest,
        caller: &Caller,
        a: &Accepted,
        now: i64,
    ) -> anyhow::Result<Vec<u64>> {
        let task_list: Vec<Option<u32>> = match &a.tasks {
            Some((tasks, _)) => tasks.iter().map(|t| Some(*t)).collect(),
            None => vec![None],
        };
        let mut ids = Vec::with_capacity(task_list.len());
        for task in task_list {
            let array_id = ids.first().copied();
            let new = NewJob {
                uid: caller.uid,
                gid: caller.gid,
                user: &caller.user,
                partition: &a.partition,
                time_limit: a.time_limit,
                request: req,
                submit_time: now,
                account: a.account.as_deref(),
                array: task.map(|t| (array_id, t)),
            };
            let id = Db::insert_job(tx, &new).await?;
            ids.push(id);
            let spec = JobSpec {
                id: JobId(id),
                name: req.name.clone(),
                user: caller.user.clone(),
                account: a.account.clone(),
                partition: a.partition.clone(),
                resources: resources_of(req),
                time_limit: a.time_limit,
                submit_time: Timestamp(now),
                emergency: req.emergency,
                datasets: req.datasets.clone(),
                dependencies: a.dependencies.clone(),
                array: task.map(|t| ArrayTask {
                    array_id: JobId(array_id.unwrap_or(id)),
                    task: t,
                    throttle: a.tasks.as_ref().and_then(|(_, th)| *th),
                }),
            };
            self.sched.enqueue(spec.clone());
            let life = JobLife::pending(!req.no_requeue);
            let row = JobRow {
                id,
                uid: caller.uid,
                gid: caller.gid,
                spec,
                request: req.clone(),
                life,
            };
            self.jobs.admit(id, row);
        }
        self.pass_need.add(&ids);
        tracing::debug!(jobs = ?ids, user = %caller.user, "submitted");
        Ok(ids)
    }
}
