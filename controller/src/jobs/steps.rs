//! The `srun` steps of a job's attempts: written as its node reports them while it runs, and
//! with the batch that takes the attempt's end; read by `show` and `sacct`.

use crate::api::steps::{MAX_STEPS, StepRecord};
use crate::db::{Db, DbError};
use crate::engine::Engine;
use labpool_scheduler::JobState;
use sqlx::{Row, Sqlite, Transaction};

pub use crate::api::steps::StepView;

impl Db {
    /// Keeps an attempt's steps: a new one is added, a running one takes its end, and an
    /// ended one is never written again (a report sent twice writes it once).
    pub async fn insert_steps(
        tx: &mut Transaction<'_, Sqlite>,
        job: u64,
        attempt: u32,
        steps: &[StepRecord],
    ) -> Result<(), DbError> {
        for s in steps {
            sqlx::query(
                "INSERT INTO steps (job, attempt, step, name, tasks, nodes, start_time, end_time, exit_code, signal) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (job, attempt, step) DO UPDATE SET end_time = excluded.end_time, \
                 exit_code = excluded.exit_code, signal = excluded.signal \
                 WHERE steps.end_time = 0",
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

impl Engine {
    /// A running attempt's steps, as its node reports them while it runs: kept when the
    /// attempt is the job's current one, running on that node.
    pub(crate) fn on_steps(
        &mut self,
        node: &str,
        job: u64,
        attempt: u32,
        mut steps: Vec<StepRecord>,
    ) {
        let current = self.jobs.job(job).is_some_and(|r| {
            r.attempt == attempt
                && r.state == JobState::Running
                && labpool_lifecycle::Tracked::life(r).is_on(node)
        });
        if !current {
            tracing::debug!(
                job,
                attempt,
                node,
                "steps of an attempt not running there: ignored"
            );
            return;
        }
        steps.truncate(MAX_STEPS);
        self.outbox.steps(job, attempt, steps);
    }
}
