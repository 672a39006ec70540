//! The database's quota tables: limits, scans and grace records.

use crate::db::{Db, DbError};
use labpool_quotas::limits::Limit;
use labpool_quotas::scan::ScanReport;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet};

/// The user name that stands for the admin's default limit.
pub const DEFAULT_USER: &str = "*";

/// Scans kept per file system.
const SCANS_KEPT: i64 = 48;

/// A stored scan.
#[derive(Debug, Clone)]
pub struct StoredScan {
    /// Started, ms.
    pub started: i64,
    /// Finished, ms.
    pub finished: i64,
    /// What it found.
    pub report: ScanReport,
}

fn opt(v: Option<u64>) -> Option<i64> {
    v.map(|n| n.min(i64::MAX as u64) as i64)
}

impl Db {
    /// Every stored limit: (user or `*`, fs) -> limit.
    pub async fn quota_limits(&self) -> Result<BTreeMap<(String, String), Limit>, DbError> {
        let rows = sqlx::query(
            "SELECT user, fs, soft_bytes, hard_bytes, soft_files, hard_files, grace_secs FROM quota_limits",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out = BTreeMap::new();
        for r in rows {
            let get = |c: &str| r.try_get::<Option<i64>, _>(c).map(|v| v.map(|n| n as u64));
            out.insert(
                (r.try_get("user")?, r.try_get("fs")?),
                Limit {
                    soft_bytes: get("soft_bytes")?,
                    hard_bytes: get("hard_bytes")?,
                    soft_files: get("soft_files")?,
                    hard_files: get("hard_files")?,
                    grace_secs: get("grace_secs")?,
                },
            );
        }
        Ok(out)
    }

    /// Sets (replaces) one limit.
    pub async fn set_quota_limit(
        &self,
        user: &str,
        fs: &str,
        l: &Limit,
        by: &str,
        now: i64,
    ) -> Result<(), DbError> {
        sqlx::query(
            "INSERT INTO quota_limits (user, fs, soft_bytes, hard_bytes, soft_files, hard_files, grace_secs, set_by, set_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (user, fs) DO UPDATE SET soft_bytes = excluded.soft_bytes, hard_bytes = excluded.hard_bytes, \
             soft_files = excluded.soft_files, hard_files = excluded.hard_files, grace_secs = excluded.grace_secs, \
             set_by = excluded.set_by, set_at = excluded.set_at",
        )
        .bind(user)
        .bind(fs)
        .bind(opt(l.soft_bytes))
        .bind(opt(l.hard_bytes))
        .bind(opt(l.soft_files))
        .bind(opt(l.hard_files))
        .bind(opt(l.grace_secs))
        .bind(by)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Stores a scan, keeps the newest ones, and records which uids are over a soft limit from
    /// now on (`over`); a uid no longer over loses its record.
    pub async fn store_quota_scan(
        &self,
        fs: &str,
        scan: &StoredScan,
        over: &BTreeSet<u32>,
    ) -> Result<(), DbError> {
        let mut tx = self.begin().await?;
        let json = serde_json::to_string(&scan.report).unwrap_or_default();
        sqlx::query("INSERT INTO quota_scans (fs, started, finished, report) VALUES (?, ?, ?, ?)")
            .bind(fs)
            .bind(scan.started)
            .bind(scan.finished)
            .bind(json)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "DELETE FROM quota_scans WHERE fs = ? AND id NOT IN \
             (SELECT id FROM quota_scans WHERE fs = ? ORDER BY id DESC LIMIT ?)",
        )
        .bind(fs)
        .bind(fs)
        .bind(SCANS_KEPT)
        .execute(&mut *tx)
        .await?;
        let before: Vec<i64> = sqlx::query("SELECT uid FROM quota_grace WHERE fs = ?")
            .bind(fs)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| r.try_get("uid"))
            .collect::<Result<_, _>>()?;
        for uid in before {
            if !over.contains(&(uid as u32)) {
                sqlx::query("DELETE FROM quota_grace WHERE fs = ? AND uid = ?")
                    .bind(fs)
                    .bind(uid)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for uid in over {
            sqlx::query("INSERT OR IGNORE INTO quota_grace (uid, fs, since) VALUES (?, ?, ?)")
                .bind(i64::from(*uid))
                .bind(fs)
                .bind(scan.finished)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The newest scan of `fs`.
    pub async fn latest_quota_scan(&self, fs: &str) -> Result<Option<StoredScan>, DbError> {
        let row = sqlx::query(
            "SELECT started, finished, report FROM quota_scans WHERE fs = ? ORDER BY id DESC LIMIT 1",
        )
        .bind(fs)
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let text: String = r.try_get("report")?;
        Ok(Some(StoredScan {
            started: r.try_get("started")?,
            finished: r.try_get("finished")?,
            report: serde_json::from_str(&text).map_err(|e| DbError::Corrupt {
                job: 0,
                what: format!("quota scan report: {e}"),
            })?,
        }))
    }

    /// Since when each uid has been over a soft limit on `fs`, ms.
    pub async fn quota_grace(&self, fs: &str) -> Result<BTreeMap<u32, i64>, DbError> {
        let rows = sqlx::query("SELECT uid, since FROM quota_grace WHERE fs = ?")
            .bind(fs)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<i64, _>("uid")? as u32, r.try_get("since")?)))
            .collect()
    }
}
