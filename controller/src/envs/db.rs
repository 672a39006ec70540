//! The database's environment tables: builds, and the names that point at them.

use crate::db::{ACTIVE_STATES, Db, DbError};
use sqlx::Row;

/// A build as stored.
#[derive(Debug, Clone)]
pub struct EnvRow {
    /// Id.
    pub id: String,
    /// Kind word.
    pub kind: String,
    /// Lock text.
    pub lock: String,
    /// Platform.
    pub platform: String,
    /// Spec text.
    pub spec: String,
    /// Fixed path.
    pub dir: String,
    /// Packed build.
    pub archive: String,
    /// Bytes on disk.
    pub bytes: i64,
    /// Bytes packed.
    pub archive_bytes: i64,
    /// Built, ms.
    pub built: i64,
    /// Who built it.
    pub built_by: String,
    /// Build time, ms.
    pub build_ms: i64,
    /// Build log.
    pub build_log: String,
}

/// A name: (owner, name, id); owner is empty for shared names.
pub type EnvName = (String, String, String);

impl Db {
    /// The build with `id`, if recorded.
    pub async fn env(&self, id: &str) -> Result<Option<EnvRow>, DbError> {
        let row = sqlx::query(
            "SELECT id, kind, lock, platform, spec, dir, archive, bytes, archive_bytes, built, built_by, build_ms, build_log FROM envs WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(EnvRow {
            id: r.try_get("id")?,
            kind: r.try_get("kind")?,
            lock: r.try_get("lock")?,
            platform: r.try_get("platform")?,
            spec: r.try_get("spec")?,
            dir: r.try_get("dir")?,
            archive: r.try_get("archive")?,
            bytes: r.try_get("bytes")?,
            archive_bytes: r.try_get("archive_bytes")?,
            built: r.try_get("built")?,
            built_by: r.try_get("built_by")?,
            build_ms: r.try_get("build_ms")?,
            build_log: r.try_get("build_log")?,
        }))
    }

    /// Records a build.
    pub async fn insert_env(&self, e: &EnvRow) -> Result<(), DbError> {
        sqlx::query(
            "INSERT OR REPLACE INTO envs (id, kind, lock, platform, spec, dir, archive, bytes, archive_bytes, built, built_by, build_ms, build_log) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&e.id)
        .bind(&e.kind)
        .bind(&e.lock)
        .bind(&e.platform)
        .bind(&e.spec)
        .bind(&e.dir)
        .bind(&e.archive)
        .bind(e.bytes)
        .bind(e.archive_bytes)
        .bind(e.built)
        .bind(&e.built_by)
        .bind(e.build_ms)
        .bind(&e.build_log)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Points `owner`'s `name` at `id`; returns the id it pointed at before.
    pub async fn set_env_name(
        &self,
        owner: &str,
        name: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<String>, DbError> {
        let before = self.env_name(owner, name).await?;
        sqlx::query(
            "INSERT OR REPLACE INTO env_names (owner, name, id, updated) VALUES (?, ?, ?, ?)",
        )
        .bind(owner)
        .bind(name)
        .bind(id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(before.filter(|b| b != id))
    }

    /// The id `owner`'s `name` points at.
    pub async fn env_name(&self, owner: &str, name: &str) -> Result<Option<String>, DbError> {
        let row = sqlx::query("SELECT id FROM env_names WHERE owner = ? AND name = ?")
            .bind(owner)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("id")).transpose()?)
    }

    /// Every name; only `owner`'s and the shared ones unless `owner` is `None`.
    pub async fn env_names(&self, owner: Option<&str>) -> Result<Vec<EnvName>, DbError> {
        let rows = sqlx::query(
            "SELECT owner, name, id FROM env_names WHERE ?1 IS NULL OR owner = ?1 OR owner = '' ORDER BY owner, name",
        )
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| Ok((r.try_get("owner")?, r.try_get("name")?, r.try_get("id")?)))
            .collect()
    }

    /// Removes a name.
    pub async fn remove_env_name(&self, owner: &str, name: &str) -> Result<(), DbError> {
        sqlx::query("DELETE FROM env_names WHERE owner = ? AND name = ?")
            .bind(owner)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// True when a name or an unfinished job still uses the build `id`.
    pub async fn env_in_use(&self, id: &str) -> Result<bool, DbError> {
        let names: i64 = sqlx::query("SELECT count(*) AS n FROM env_names WHERE id = ?")
            .bind(id)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        let pattern = format!("%\"env_id\":\"{id}\"%");
        let sql = format!(
            "SELECT count(*) AS n FROM jobs WHERE state IN {ACTIVE_STATES} AND request LIKE ?"
        );
        let jobs: i64 = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(pattern)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        Ok(names + jobs > 0)
    }

    /// Every recorded build's id.
    pub async fn env_ids(&self) -> Result<Vec<String>, DbError> {
        let rows = sqlx::query("SELECT id FROM envs ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Forgets a build.
    pub async fn remove_env(&self, id: &str) -> Result<(), DbError> {
        sqlx::query("DELETE FROM envs WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
