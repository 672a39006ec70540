//! Updates of a waiting job (`labpool update`, `scontrol update JobId=…`): its time limit,
//! partition, dependencies, and node count (which must stay 1). The change passes the same
//! admission as a submit, so a job cannot be updated into what it could not be submitted as.
//! A running job is not changed: its limit is enforced on its node.

use crate::api::UpdateRequest;
use crate::db::{Db, DbError};
use crate::engine::Engine;
use crate::error::ApiError;
use crate::identity::Caller;
use labpool_scheduler::admission::AdmitRequest;
use labpool_scheduler::dependency::{parse_dependencies, wants_singleton};
use labpool_scheduler::options::parse_node_count;
use labpool_scheduler::time::parse_time_limit;
use labpool_scheduler::{JobId, JobState, TimeLimit};
use sqlx::{Sqlite, Transaction};

/// A waiting job's new admitted spec, written with the batch.
#[derive(Debug, Clone)]
pub struct SpecUpdate {
    /// The job.
    pub job: u64,
    /// Its partition.
    pub partition: String,
    /// Its time limit.
    pub time_limit: TimeLimit,
    /// Its dependencies, as written.
    pub dependency: Option<String>,
    /// What changed, for its event log, with who changed it.
    pub detail: String,
    /// When.
    pub time: i64,
}

impl Engine {
    /// Checks and applies `req`; the answer says what changed.
    pub(crate) async fn update(
        &mut self,
        req: &UpdateRequest,
        caller: &Caller,
    ) -> anyhow::Result<Result<String, ApiError>> {
        let bad = |msg: String, hint: Option<&str>| {
            Ok(Err(ApiError::bad_request(msg, hint.map(str::to_string))))
        };
        let id = req.id;
        let Some(row) = self.jobs.job(id) else {
            return Ok(Err(match self.db.job(id).await? {
                Some(r) => {
                    ApiError::bad_request(format!("job {id} already ended ({})", r.state), None)
                }
                None => ApiError::not_found(format!("no job {id}"), None),
            }));
        };
        if let Err(why) = self.owner_or_admin(row, caller, "update") {
            return bad(why, None);
        }
        if row.state != JobState::Pending {
            return bad(
                format!(
                    "job {id} is {}; only a waiting job can be updated",
                    row.state
                ),
                Some("cancel it and submit it again with the new values"),
            );
        }
        let mut problems = Vec::new();
        if let Some(n) = &req.nodes {
            match parse_node_count(n) {
                Ok(1) => {}
                Ok(n) => problems.push(format!("NumNodes={n}: labpool runs each job on one node")),
                Err(e) => problems.push(e.to_string()),
            }
        }
        let time_limit = match req.time_limit.as_deref().map(parse_time_limit).transpose() {
            Ok(t) => t.or(Some(row.spec.time_limit)),
            Err(e) => {
                problems.push(format!("TimeLimit: {e}"));
                None
            }
        };
        // `Dependency=` (empty) clears them, as in scontrol.
        let dependency = match &req.dependency {
            Some(d) if d.trim().is_empty() => None,
            Some(d) => Some(d.clone()),
            None => row.request.dependency.clone(),
        };
        let dependencies = match dependency.as_deref().map(parse_dependencies).transpose() {
            Ok(d) => d.unwrap_or_default(),
            Err(e) => {
                problems.push(e.to_string());
                Vec::new()
            }
        };
        for d in &dependencies {
            if d.job.0 == id {
                problems.push(format!("{d}: a job cannot wait for itself"));
            } else if self.jobs.job(d.job.0).is_none() && self.db.job(d.job.0).await?.is_none() {
                problems.push(format!("{d}: there is no job {}", d.job));
            }
        }
        if !problems.is_empty() {
            return bad(problems.join("; "), Some("nothing was changed"));
        }
        let partition = req
            .partition
            .clone()
            .unwrap_or_else(|| row.spec.partition.clone());
        let admit = AdmitRequest {
            user: &row.spec.user,
            account: row.spec.account.as_deref(),
            partition: Some(&partition),
            time_limit,
            resources: &row.spec.resources,
            nodes: &row.spec.nodes,
            emergency: row.spec.emergency,
            count: 1,
        };
        let admitted = match self.sched.admit(&admit) {
            Ok(a) => a,
            Err(e) => return Ok(Err(ApiError::bad_request(e.to_string(), e.hint()))),
        };
        let singleton = dependency.as_deref().is_some_and(wants_singleton);
        let mut changed = Vec::new();
        if admitted.partition != row.spec.partition {
            changed.push(format!("Partition={}", admitted.partition));
        }
        if admitted.time_limit != row.spec.time_limit {
            changed.push(format!(
                "TimeLimit={}",
                crate::api::limit_secs(admitted.time_limit)
                    .map_or_else(|| "UNLIMITED".into(), labpool_units::format_elapsed)
            ));
        }
        if req.dependency.is_some() && dependency != row.request.dependency {
            changed.push(format!(
                "Dependency={}",
                dependency.as_deref().unwrap_or("")
            ));
        }
        if changed.is_empty() {
            return Ok(Ok(format!("job {id}: nothing to change")));
        }
        self.sched.update_pending(
            JobId(id),
            admitted.partition.clone(),
            admitted.time_limit,
            dependencies,
            singleton,
        );
        let (partition, limit, dep) = (
            admitted.partition.clone(),
            admitted.time_limit,
            dependency.clone(),
        );
        self.jobs.update_record(id, |r| {
            r.spec.partition = partition;
            r.spec.time_limit = limit;
            r.request.dependency = dep;
        });
        let detail = format!("{} by {}", changed.join(" "), caller.user);
        self.outbox.spec_update(SpecUpdate {
            job: id,
            partition: admitted.partition,
            time_limit: admitted.time_limit,
            dependency,
            detail: detail.clone(),
            time: self.clock.now_ms(),
        });
        Ok(Ok(format!("job {id} updated: {detail}")))
    }
}

impl Db {
    /// Writes a waiting job's new spec and a line in its event log.
    pub async fn update_spec(
        tx: &mut Transaction<'_, Sqlite>,
        u: &SpecUpdate,
    ) -> Result<(), DbError> {
        sqlx::query(
            "UPDATE jobs SET partition = ?, time_limit_s = ?, request = json_set(request, '$.dependency', ?) WHERE id = ?",
        )
        .bind(&u.partition)
        .bind(crate::api::limit_secs(u.time_limit).map(|s| s as i64))
        .bind(&u.dependency)
        .bind(u.job as i64)
        .execute(&mut **tx)
        .await?;
        Db::event(tx, u.job, u.time, "update", Some(&u.detail)).await
    }
}
