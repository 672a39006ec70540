//! Job rows: what the controller keeps of a job ([`JobRow`]), a job to insert, its events, and
//! the SQL that reads and inserts them.

use crate::api::{JobView, SubmitRequest};
use crate::clock::rfc3339;
use crate::db::{ACTIVE_STATES, Db, DbError};
use labpool_lifecycle::{JobLife, Tracked};
use labpool_scheduler::array::parse_array;
use labpool_scheduler::dependency::{parse_dependencies, wants_singleton};
use labpool_scheduler::job::ArrayTask;
use labpool_scheduler::{JobId, JobSpec, JobState, Resources, TimeLimit, Timestamp};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, Transaction};
use std::path::PathBuf;
use std::str::FromStr;

/// A job row: who, what was asked, and its lifecycle. Reads of the lifecycle fields go
/// through `Deref` (`row.state`); changes only through
/// [`Transition`](labpool_lifecycle::Transition)s, applied to the row and to the table from the
/// same value (see `crate::jobs`).
#[derive(Debug, Clone)]
pub struct JobRow {
    /// Id.
    pub id: u64,
    /// Owner's uid.
    pub uid: u32,
    /// Owner's gid.
    pub gid: u32,
    /// Scheduler view.
    pub spec: JobSpec,
    /// The request as submitted.
    pub request: SubmitRequest,
    /// State, attempt, placement, times, outcome.
    pub life: JobLife,
}

impl std::ops::Deref for JobRow {
    type Target = JobLife;
    fn deref(&self) -> &JobLife {
        &self.life
    }
}

impl Tracked for JobRow {
    fn life(&self) -> &JobLife {
        &self.life
    }
    fn life_mut(&mut self) -> &mut JobLife {
        &mut self.life
    }
}

impl JobRow {
    /// The API view, with elapsed time measured against `now_ms` for running jobs.
    pub fn view(&self, now_ms: i64) -> JobView {
        let elapsed = self
            .start_time
            .map(|s| ((self.end_time.unwrap_or(now_ms) - s).max(0) / 1000) as u64);
        JobView {
            id: self.id,
            name: self.spec.name.clone(),
            user: self.spec.user.clone(),
            uid: self.uid,
            partition: self.spec.partition.clone(),
            state: self.state,
            reason: self.reason.clone(),
            reason_detail: self.reason_detail.clone(),
            node: self.node.clone(),
            gpus: self.gpus.clone(),
            others: self.others.clone(),
            ports: self.ports,
            node_count: self.request.node_count.max(1),
            ntasks: self.request.ntasks.max(1),
            gpus_requested: self.spec.resources.gpus,
            gpu_type: self.spec.resources.gpu_type.clone(),
            cpus: self.spec.resources.cpus,
            mem_mib: self.spec.resources.mem_mib,
            time_limit_s: crate::api::limit_secs(self.spec.time_limit),
            exit_code: self.exit_code,
            signal: self.signal,
            submit_time: rfc3339(self.spec.submit_time.0),
            begin_time: self.spec.begin.map(|b| rfc3339(b.0)),
            comment: self.request.comment.clone(),
            start_time: self.start_time.map(rfc3339),
            end_time: self.end_time.map(rfc3339),
            elapsed_s: elapsed,
            workdir: self.request.workdir.clone(),
            stdout: self.stdout.clone(),
            stderr: self.stderr.clone(),
            attempt: self.attempt,
            account: self.spec.account.clone(),
            emergency: self.spec.emergency,
            datasets: self.spec.datasets.clone(),
            dependency: self.request.dependency.clone(),
            array_id: self.spec.array.as_ref().map(|a| a.array_id.0),
            array_task: self.spec.array.as_ref().map(|a| a.task),
            env: self.request.env.clone(),
            env_id: self.request.env_id.clone(),
            gpu_share: self.request.gpu_share,
            slice: self.request.slice,
            isolation: self.isolation.clone(),
            gpu_usage: None,
            cancelled_by: self.life.cancel_requested_by.clone(),
        }
    }
}

/// A new job to insert.
pub struct NewJob<'a> {
    /// Owner's uid.
    pub uid: u32,
    /// Owner's gid.
    pub gid: u32,
    /// Owner's name.
    pub user: &'a str,
    /// Partition after admission.
    pub partition: &'a str,
    /// Time limit after admission.
    pub time_limit: TimeLimit,
    /// The request.
    pub request: &'a SubmitRequest,
    /// Submit time, ms.
    pub submit_time: i64,
    /// Account after admission.
    pub account: Option<&'a str>,
    /// Array id (None for the first task, which becomes the array's id) and task index.
    pub array: Option<(Option<u64>, u32)>,
    /// Held from the start (`--hold`).
    pub hold: Option<labpool_lifecycle::Hold>,
}

pub use crate::api::JobEvent;

const JOB_COLUMNS: &str = "id, name, user, uid, gid, partition, state, reason, reason_detail, gpus_requested, gpu_type, \
     cpus, mem_mib, time_limit_s, node, gpus, exit_code, signal, submit_time, start_time, end_time, attempt, cancel_requested_by, stdout, stderr, request, account, emergency, array_id, array_task, isolation, hold, requeue_requested_by, others, ports, preemption, part_ended, pause";

impl Db {
    /// The id the next job will get (ids are never reused).
    pub async fn next_job_id(&self) -> Result<u64, DbError> {
        let seq: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'")
                .fetch_optional(&self.pool)
                .await?;
        Ok(seq.unwrap_or(0) as u64 + 1)
    }

    /// Inserts a job, returning its id.
    pub async fn insert_job(
        tx: &mut Transaction<'_, Sqlite>,
        job: &NewJob<'_>,
    ) -> Result<u64, DbError> {
        let r = job.request;
        let request = serde_json::to_string(r).expect("a request serialises");
        let row = sqlx::query(
            "INSERT INTO jobs (name, user, uid, gid, partition, state, gpus_requested, gpu_type, cpus, mem_mib, \
             time_limit_s, submit_time, workdir, request, account, emergency, array_id, array_task, hold) \
             VALUES (?, ?, ?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(&r.name)
        .bind(job.user)
        .bind(job.uid as i64)
        .bind(job.gid as i64)
        .bind(job.partition)
        .bind(r.gpus as i64)
        .bind(&r.gpu_type)
        .bind(r.cpus as i64)
        .bind(r.mem_mib as i64)
        .bind(crate::api::limit_secs(job.time_limit).map(|s| s as i64))
        .bind(job.submit_time)
        .bind(r.workdir.display().to_string())
        .bind(request)
        .bind(job.account)
        .bind(r.emergency)
        .bind(job.array.and_then(|(a, _)| a).map(|a| a as i64))
        .bind(job.array.map(|(_, t)| t as i64))
        .bind(super::store::hold_column(job.hold.as_ref()))
        .fetch_one(&mut **tx)
        .await?;
        let id: i64 = row.try_get(0)?;
        if let Some((None, _)) = job.array {
            // The first task's id is the array's id.
            sqlx::query("UPDATE jobs SET array_id = id WHERE id = ?")
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
        let mut detail = Vec::new();
        if r.emergency {
            detail.push("through the emergency lane".to_string());
        }
        if let Some(h) = &job.hold {
            detail.push(format!("held by {}", h.by));
        }
        let detail = (!detail.is_empty()).then(|| detail.join("; "));
        Db::event(tx, id as u64, job.submit_time, "submit", detail.as_deref()).await?;
        Ok(id as u64)
    }

    /// Jobs that are not finished, oldest first; of one user when given.
    pub async fn active_jobs(&self, user: Option<&str>) -> Result<Vec<JobRow>, DbError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN {ACTIVE_STATES} AND (?1 IS NULL OR user = ?1) ORDER BY id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Finished jobs, newest end first.
    pub async fn finished_jobs(
        &self,
        user: Option<&str>,
        since_ms: Option<i64>,
        after: Option<(i64, u64)>,
        ids: Option<&[u64]>,
        limit: u32,
    ) -> Result<Vec<JobRow>, DbError> {
        // Only the jobs named (or the tasks of the arrays named), found by the id and array
        // indexes: `sacct -j` of the jobs in flight costs the same over any history.
        // With ids, the rows are looked up by key (a condition that may be off would have
        // SQLite walk the whole history in end_time order instead).
        let named = if ids.is_some() {
            "AND id IN (SELECT value FROM json_each(?6) \
             UNION SELECT id FROM jobs WHERE array_id IN (SELECT value FROM json_each(?6)))"
        } else {
            "AND ?6 IS NULL"
        };
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE state NOT IN {ACTIVE_STATES} AND (?1 IS NULL OR user = ?1) \
             AND (?2 IS NULL OR end_time >= ?2) AND (?3 IS NULL OR (end_time, id) < (?3, ?4)) {named} \
             ORDER BY end_time DESC, id DESC LIMIT ?5"
        );
        let ids = ids.map(|i| serde_json::to_string(i).unwrap_or_else(|_| "[]".into()));
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user)
            .bind(since_ms)
            .bind(after.map(|(t, _)| t))
            .bind(after.map(|(_, id)| id as i64))
            .bind(limit as i64)
            .bind(ids)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Jobs a report over [from, to) looks at: submitted before `to` and not ended before
    /// `from`, of one user when given, by id.
    pub async fn jobs_in_range(
        &self,
        from: i64,
        to: i64,
        user: Option<&str>,
    ) -> Result<Vec<JobRow>, DbError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE submit_time < ?1 AND (end_time IS NULL OR end_time >= ?2) \
             AND (?3 IS NULL OR user = ?3) ORDER BY id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(to)
            .bind(from)
            .bind(user)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// One job.
    pub async fn job(&self, id: u64) -> Result<Option<JobRow>, DbError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id as i64)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(job_from_row).transpose()
    }

    /// A job's events, oldest first.
    pub async fn events(&self, id: u64) -> Result<Vec<JobEvent>, DbError> {
        let rows =
            sqlx::query("SELECT time, event, detail FROM job_events WHERE job_id = ? ORDER BY id")
                .bind(id as i64)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| {
                Ok(JobEvent {
                    time: rfc3339(r.try_get("time")?),
                    event: r.try_get("event")?,
                    detail: r.try_get("detail")?,
                })
            })
            .collect()
    }

    /// How a job ended, if it did: for dependencies.
    pub async fn job_state(&self, id: u64) -> Result<Option<JobState>, DbError> {
        let row = sqlx::query("SELECT state FROM jobs WHERE id = ?")
            .bind(id as i64)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let s: String = r.try_get(0)?;
            JobState::from_str(&s).map_err(|e| DbError::Corrupt {
                job: id as i64,
                what: e.to_string(),
            })
        })
        .transpose()
    }

    /// Job ids of an array.
    pub async fn array_tasks(&self, array_id: u64) -> Result<Vec<(u64, u32)>, DbError> {
        let rows =
            sqlx::query("SELECT id, array_task FROM jobs WHERE array_id = ? ORDER BY array_task")
                .bind(array_id as i64)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<i64, _>(0)? as u64,
                    r.try_get::<Option<i64>, _>(1)?.unwrap_or(0) as u32,
                ))
            })
            .collect()
    }
}

/// A JSON column of job `id`'s row, NULL as `None`; JSON that does not read is a corrupt row.
fn json_column<T: serde::de::DeserializeOwned>(
    r: &SqliteRow,
    id: i64,
    col: &str,
) -> Result<Option<T>, DbError> {
    match r.try_get::<Option<String>, _>(col)? {
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| DbError::Corrupt {
                job: id,
                what: format!("{col}: {e}"),
            }),
        None => Ok(None),
    }
}

fn job_from_row(r: &SqliteRow) -> Result<JobRow, DbError> {
    let id: i64 = r.try_get("id")?;
    let corrupt = |what: String| DbError::Corrupt { job: id, what };
    let state: String = r.try_get("state")?;
    let state = JobState::from_str(&state).map_err(|e| corrupt(e.to_string()))?;
    let gpus: String = r.try_get("gpus")?;
    let gpus = gpus
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|_| corrupt(format!("GPU list {gpus:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let request: String = r.try_get("request")?;
    let request: SubmitRequest =
        serde_json::from_str(&request).map_err(|e| corrupt(format!("request: {e}")))?;
    let time_limit = match r.try_get::<Option<i64>, _>("time_limit_s")? {
        Some(s) => TimeLimit::Seconds(s as u64),
        None => TimeLimit::Unlimited,
    };
    let opt_path = |col: &str| -> Result<Option<PathBuf>, DbError> {
        Ok(r.try_get::<Option<String>, _>(col)?.map(PathBuf::from))
    };
    let life = JobLife {
        state,
        reason: r.try_get("reason")?,
        reason_detail: r.try_get("reason_detail")?,
        node: r.try_get("node")?,
        gpus,
        exit_code: r.try_get("exit_code")?,
        signal: r.try_get("signal")?,
        start_time: r.try_get("start_time")?,
        end_time: r.try_get("end_time")?,
        attempt: r.try_get::<i64, _>("attempt")? as u32,
        cancel_requested_by: r.try_get("cancel_requested_by")?,
        stdout: opt_path("stdout")?,
        stderr: opt_path("stderr")?,
        isolation: r.try_get("isolation")?,
        requeue: !request.no_requeue,
        requeue_requested_by: r.try_get("requeue_requested_by")?,
        hold: json_column(r, id, "hold")?,
        others: json_column(r, id, "others")?.unwrap_or_default(),
        ports: json_column(r, id, "ports")?,
        preemption: json_column(r, id, "preemption")?,
        part_ended: json_column(r, id, "part_ended")?,
        pause: json_column(r, id, "pause")?,
    };
    let held = life.hold.as_ref().map(|h| h.kind);
    Ok(JobRow {
        id: id as u64,
        uid: r.try_get::<i64, _>("uid")? as u32,
        gid: r.try_get::<i64, _>("gid")? as u32,
        life,
        spec: JobSpec {
            id: JobId(id as u64),
            name: r.try_get("name")?,
            user: r.try_get("user")?,
            partition: r.try_get("partition")?,
            resources: Resources {
                nodes: request.node_count.max(1),
                gpus: r.try_get::<i64, _>("gpus_requested")? as u32,
                gpu_type: r.try_get("gpu_type")?,
                cpus: r.try_get::<i64, _>("cpus")? as u32,
                mem_mib: r.try_get::<i64, _>("mem_mib")? as u64,
                gpu_share: request.gpu_share,
                slice: request.slice,
            },
            time_limit,
            submit_time: Timestamp(r.try_get("submit_time")?),
            account: r.try_get("account")?,
            emergency: r.try_get::<i64, _>("emergency")? != 0,
            preemptible: request.preemptible,
            interactive: request.interactive,
            reservation: request.reservation.clone(),
            datasets: request.datasets.clone(),
            nodes: request.nodes.clone(),
            hold: held,
            begin: request.begin_ms.map(Timestamp),
            deadline: request.deadline_ms.map(Timestamp),
            singleton: request.dependency.as_deref().is_some_and(wants_singleton),
            dependencies: match &request.dependency {
                Some(d) => parse_dependencies(d).map_err(|e| corrupt(e.to_string()))?,
                None => Vec::new(),
            },
            array: match r.try_get::<Option<i64>, _>("array_id")? {
                Some(a) => Some(ArrayTask {
                    array_id: JobId(a as u64),
                    task: r.try_get::<Option<i64>, _>("array_task")?.unwrap_or(0) as u32,
                    throttle: request
                        .array
                        .as_deref()
                        .and_then(|s| parse_array(s).ok())
                        .and_then(|a| a.throttle),
                }),
                None => None,
            },
        },
        request,
    })
}
