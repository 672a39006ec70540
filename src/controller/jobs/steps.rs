//! The `srun` steps of a job's attempts: written with the batch that takes the attempt's end,
//! read by `show`.

use crate::api::steps::StepRecord;
use crate::controller::db::{Db, DbError};
use serde::{Deserialize, Serialize};
use sqlx::{Row, Sqlite, Transaction};

/// A step as `show` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepView {
    /// The attempt it belongs to.
    pub attempt: u32,
    /// The step as recorded.
    #[serde(flatten)]
    pub step: StepRecord,
}

impl Db {
    /// Keeps an attempt's steps; a report sent twice writes them once.
    pub async fn insert_steps(
        tx: &mut Transaction<'_, Sqlite>,
        job: u64,
        attempt: u32,
        steps: &[StepRecord],
    ) -> Result<(), DbError> {
        for s in steps {
            sqlx::query(
                "INSERT OR IGNORE INTO steps (job, attempt, step, name, tasks, nodes, start_time, end_time, exit_code, signal) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(job as i64)
            .bind(attempt as i64)
            .bind(s.step as i64)
            .bind(&s.name)
            .bind(s.tasks as i64)
            .bind(s.nodes.join(","))
            .bind(s.start_ms)
            .bind(s.end_ms)
            .bind(s.exit_code)
            .bind(s.signal)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    /// A job's steps, attempt by attempt, in step order.
    pub async fn steps(&self, job: u64) -> Result<Vec<StepView>, DbError> {
        Ok(self
            .steps_of(&[job])
            .await?
            .remove(&job)
            .unwrap_or_default())
    }

    /// The steps of each of `jobs` that has any, in one query (`sacct` of many jobs); at most
    /// 100,000 steps in all, so that no question makes an answer without bound.
    pub async fn steps_of(
        &self,
        jobs: &[u64],
    ) -> Result<std::collections::BTreeMap<u64, Vec<StepView>>, DbError> {
        let ids = serde_json::to_string(jobs).unwrap_or_else(|_| "[]".into());
        let rows = sqlx::query(
            "SELECT job, attempt, step, name, tasks, nodes, start_time, end_time, exit_code, signal \
             FROM steps WHERE job IN (SELECT value FROM json_each(?)) ORDER BY job, attempt, step \
             LIMIT 100000",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        let mut out: std::collections::BTreeMap<u64, Vec<StepView>> = Default::default();
        for r in &rows {
            let nodes: String = r.try_get("nodes")?;
            let view = StepView {
                attempt: r.try_get::<i64, _>("attempt")? as u32,
                step: StepRecord {
                    step: r.try_get::<i64, _>("step")? as u32,
                    name: r.try_get("name")?,
                    tasks: r.try_get::<i64, _>("tasks")? as u32,
                    nodes: nodes
                        .split(',')
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                        .collect(),
                    start_ms: r.try_get("start_time")?,
                    end_ms: r.try_get("end_time")?,
                    exit_code: r.try_get("exit_code")?,
                    signal: r.try_get("signal")?,
                },
            };
            out.entry(r.try_get::<i64, _>("job")? as u64)
                .or_default()
                .push(view);
        }
        Ok(out)
    }
}
