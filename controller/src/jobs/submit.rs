//! Submitting jobs: each submit of a batch passes the checks of [`super::checks`] against the
//! state the earlier ones left, then goes into the batch's one transaction. A submit can make
//! several jobs (an array), spend an emergency token, and wait on other jobs.

use crate::api::{SubmitRequest, Submitted};
use crate::db::Db;
use crate::engine::Engine;
use crate::error::ApiError;
use crate::identity::Caller;
use crate::jobs::checks::Accepted;
use crate::jobs::submit_keys::MAX_KEY;
use crate::jobs::{JobRow, NewJob};
use labpool_lifecycle::{Hold, JobLife};
use labpool_scheduler::credits::{Entry, EntryKind};
use labpool_scheduler::dependency::wants_singleton;
use labpool_scheduler::job::ArrayTask;
use labpool_scheduler::{HoldBy, JobId, JobSpec, Resources, Timestamp};
use sqlx::{Sqlite, Transaction};
use tokio::sync::oneshot;

/// A submit waiting for its batch.
pub(crate) type SubmitItem = (
    Box<SubmitRequest>,
    Caller,
    oneshot::Sender<Result<Submitted, ApiError>>,
);

pub(crate) fn resources_of(req: &SubmitRequest) -> Resources {
    Resources {
        nodes: req.node_count.max(1),
        gpus: req.gpus,
        gpu_type: req.gpu_type.clone(),
        cpus: req.cpus,
        mem_mib: req.mem_mib,
        gpu_share: req.gpu_share,
        slice: req.slice,
    }
}

/// What the scheduler is told of a job that passed the checks.
pub(crate) fn job_spec(
    req: &SubmitRequest,
    user: &str,
    a: &Accepted,
    id: JobId,
    array: Option<ArrayTask>,
    now: i64,
) -> JobSpec {
    JobSpec {
        id,
        name: req.name.clone(),
        user: user.to_string(),
        account: a.account.clone(),
        partition: a.partition.clone(),
        resources: resources_of(req),
        time_limit: a.time_limit,
        submit_time: Timestamp(now),
        emergency: req.emergency,
        preemptible: req.preemptible,
        interactive: req.interactive,
        reservation: req.reservation.clone(),
        datasets: req.datasets.clone(),
        dependencies: a.dependencies.clone(),
        nodes: req.nodes.clone(),
        hold: req.hold.then_some(HoldBy::User),
        begin: req.begin_ms.map(Timestamp),
        deadline: req.deadline_ms.map(Timestamp),
        singleton: req.dependency.as_deref().is_some_and(wants_singleton),
        array,
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
            let key = req.idempotency_key.clone();
            if let Some(key) = &key {
                if key.is_empty() || key.len() > MAX_KEY || key.chars().any(|c| c.is_control()) {
                    let e = ApiError::bad_request(
                        format!(
                            "idempotency_key: 1 to {MAX_KEY} printable characters, not {} bytes",
                            key.len()
                        ),
                        None,
                    );
                    self.outbox.reply(reply, Err(e));
                    continue;
                }
                // Taken before, in this batch or an earlier one: the same answer again.
                let earlier = match self.outbox.submit_key(caller.uid, key) {
                    Some(s) => Some(s),
                    None => self.db.submitted_with_key(caller.uid, key).await?,
                };
                if let Some(submitted) = earlier {
                    tracing::info!(user = %caller.user, job = submitted.job_id, "a retried submit answered with its first reply");
                    self.outbox.reply(reply, Ok(submitted));
                    continue;
                }
            }
            // A partition that hands out slices gives one to a plain one-GPU job; the request
            // keeps it, so `show` and a restart see the slice.
            let mut req = req;
            if req.slice.is_none() {
                req.slice = self
                    .sched
                    .partition_slice(req.partition.as_deref(), &resources_of(&req));
            }
            let accepted = match self.check_submit(&req, &caller).await? {
                Ok(a) => a,
                Err(e) => {
                    self.outbox.reply(reply, Err(e));
                    continue;
                }
            };
            if !accepted.dependencies.is_empty() {
                let mut list: Vec<String> = accepted
                    .dependencies
                    .iter()
                    .map(|d| d.to_string())
                    .collect();
                if req.dependency.as_deref().is_some_and(wants_singleton) {
                    list.push("singleton".into());
                }
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
                self.ledger.record([entry]);
            }
            let submitted = Submitted {
                job_id: ids[0],
                job_ids: ids,
                partition: accepted.partition,
                time_limit: accepted.time_limit,
                account: accepted.account,
                warnings: accepted.warnings,
            };
            if let Some(key) = key {
                Db::record_submit_key(&mut tx, caller.uid, &key, &submitted, now).await?;
                self.outbox.taken_key(caller.uid, key, submitted.clone());
            }
            self.outbox.reply(reply, Ok(submitted));
        }
        self.batch_tx = Some(tx);
        Ok(())
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
        let hold = req.hold.then(|| Hold {
            by: caller.user.clone(),
            kind: HoldBy::User,
        });
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
                hold: hold.clone(),
            };
            let id = Db::insert_job(tx, &new).await?;
            ids.push(id);
            let array = task.map(|t| ArrayTask {
                array_id: JobId(array_id.unwrap_or(id)),
                task: t,
                throttle: a.tasks.as_ref().and_then(|(_, th)| *th),
            });
            let spec = job_spec(req, &caller.user, a, JobId(id), array, now);
            self.sched.enqueue(spec.clone());
            let mut life = JobLife::pending(!req.no_requeue);
            life.hold = hold.clone();
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
