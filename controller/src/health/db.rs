//! The `job_gpu_usage` table: each attempt's GPU use summary, kept with the job.

use crate::db::{Db, DbError};
use labpool_monitor::usage::JobUsage;
use sqlx::Row;
use std::collections::BTreeMap;

impl Db {
    /// Adds a line to a job's event log, outside the engine (what the monitor did to it).
    pub async fn note_job_event(
        &self,
        job: u64,
        time: i64,
        event: &str,
        detail: &str,
    ) -> Result<(), DbError> {
        let mut tx = self.pool.begin().await?;
        Db::event(&mut tx, job, time, event, Some(detail)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Writes (replaces) attempts' summaries, in one transaction.
    pub async fn save_gpu_usage(
        &self,
        rows: &BTreeMap<(u64, u32), JobUsage>,
    ) -> Result<(), DbError> {
        let mut tx = self.pool.begin().await?;
        for ((job, attempt), u) in rows {
            sqlx::query(
                "INSERT OR REPLACE INTO job_gpu_usage (job, attempt, summary, util_mean, util_peak, mem_peak_mib, energy_j) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(*job as i64)
            .bind(*attempt as i64)
            .bind(serde_json::to_string(u).unwrap_or_default())
            .bind(u.util_mean())
            .bind(u.util_peak)
            .bind(u.mem_peak_mib as i64)
            .bind(u.energy_j)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// One attempt's summary, if it was ever sampled.
    pub async fn gpu_usage(&self, job: u64, attempt: u32) -> Result<Option<JobUsage>, DbError> {
        let row = sqlx::query("SELECT summary FROM job_gpu_usage WHERE job = ? AND attempt = ?")
            .bind(job as i64)
            .bind(attempt as i64)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row
            .and_then(|r| r.try_get::<String, _>("summary").ok())
            .and_then(|s| serde_json::from_str(&s).ok()))
    }

    /// The summaries of these jobs' latest attempts, by job.
    pub async fn gpu_usage_of(&self, jobs: &[u64]) -> Result<BTreeMap<u64, JobUsage>, DbError> {
        let mut out = BTreeMap::new();
        for chunk in jobs.chunks(500) {
            let marks = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT job, summary FROM job_gpu_usage WHERE job IN ({marks}) ORDER BY job, attempt"
            );
            // Only "?" placeholders are formatted in; the ids are bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for j in chunk {
                q = q.bind(*j as i64);
            }
            for r in q.fetch_all(&self.pool).await? {
                let job: i64 = r.try_get("job")?;
                let summary: String = r.try_get("summary")?;
                if let Ok(u) = serde_json::from_str(&summary) {
                    out.insert(job as u64, u);
                }
            }
        }
        Ok(out)
    }
}

/// A job event as the notifier reads it: id, job, event, detail.
pub type EventRow = (i64, u64, String, String);

impl Db {
    /// The newest job event's id (0 when there is none).
    pub async fn last_job_event(&self) -> Result<i64, DbError> {
        let row = sqlx::query("SELECT COALESCE(MAX(id), 0) AS id FROM job_events")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("id")?)
    }

    /// Job events after `after`, oldest first, at most `limit`.
    pub async fn job_events_after(&self, after: i64, limit: i64) -> Result<Vec<EventRow>, DbError> {
        let rows = sqlx::query(
            "SELECT id, job_id, event, COALESCE(detail, '') AS detail FROM job_events WHERE id > ? ORDER BY id LIMIT ?",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("id")?,
                    r.try_get::<i64, _>("job_id")? as u64,
                    r.try_get("event")?,
                    r.try_get("detail")?,
                ))
            })
            .collect()
    }
}
