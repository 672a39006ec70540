//! The database's dataset tables: registered datasets, their versions, which version each job
//! was given, and the STAGING step of a job's life.

use crate::db::{Db, DbError};
use sqlx::{Row, Sqlite, Transaction};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A registered dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRow {
    /// Name.
    pub name: String,
    /// Source directory.
    pub path: PathBuf,
    /// What it is.
    pub description: String,
    /// Registered, ms.
    pub created: i64,
    /// By whom.
    pub created_by: String,
    /// The version new jobs get.
    pub current: String,
}

/// One recorded version.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionRow {
    /// Version (manifest hash).
    pub version: String,
    /// Recorded, ms.
    pub created: i64,
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
    /// Files added or changed since the version before.
    pub changed_files: u64,
    /// Their bytes.
    pub changed_bytes: u64,
}

impl Db {
    /// Every registered dataset, by name.
    pub async fn datasets(&self) -> Result<Vec<DatasetRow>, DbError> {
        let rows = sqlx::query(
            "SELECT name, path, description, created, created_by, current FROM datasets ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DatasetRow {
                    name: r.try_get("name")?,
                    path: PathBuf::from(r.try_get::<String, _>("path")?),
                    description: r.try_get("description")?,
                    created: r.try_get("created")?,
                    created_by: r.try_get("created_by")?,
                    current: r.try_get("current")?,
                })
            })
            .collect()
    }

    /// A dataset's versions, newest first.
    pub async fn dataset_versions(&self, name: &str) -> Result<Vec<VersionRow>, DbError> {
        let rows = sqlx::query(
            "SELECT version, created, files, bytes, changed_files, changed_bytes FROM dataset_versions \
             WHERE name = ? ORDER BY created DESC, rowid DESC",
        )
        .bind(name)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(VersionRow {
                    version: r.try_get("version")?,
                    created: r.try_get("created")?,
                    files: r.try_get::<i64, _>("files")? as u64,
                    bytes: r.try_get::<i64, _>("bytes")? as u64,
                    changed_files: r.try_get::<i64, _>("changed_files")? as u64,
                    changed_bytes: r.try_get::<i64, _>("changed_bytes")? as u64,
                })
            })
            .collect()
    }

    /// Registers a dataset with its first version.
    pub async fn insert_dataset(
        tx: &mut Transaction<'_, Sqlite>,
        d: &DatasetRow,
        v: &VersionRow,
    ) -> Result<(), DbError> {
        sqlx::query(
            "INSERT INTO datasets (name, path, description, created, created_by, current) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&d.name)
        .bind(d.path.display().to_string())
        .bind(&d.description)
        .bind(d.created)
        .bind(&d.created_by)
        .bind(&d.current)
        .execute(&mut **tx)
        .await?;
        Db::insert_version(tx, &d.name, v).await
    }

    /// Records a version and makes it the one new jobs get. A version seen before (the source
    /// went back to an old state) becomes current again.
    pub async fn insert_version(
        tx: &mut Transaction<'_, Sqlite>,
        name: &str,
        v: &VersionRow,
    ) -> Result<(), DbError> {
        sqlx::query(
            "INSERT INTO dataset_versions (name, version, created, files, bytes, changed_files, changed_bytes) \
             VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name, version) DO NOTHING",
        )
        .bind(name)
        .bind(&v.version)
        .bind(v.created)
        .bind(v.files as i64)
        .bind(v.bytes as i64)
        .bind(v.changed_files as i64)
        .bind(v.changed_bytes as i64)
        .execute(&mut **tx)
        .await?;
        sqlx::query("UPDATE datasets SET current = ? WHERE name = ?")
            .bind(&v.version)
            .bind(name)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Records the versions a job was given at placement.
    pub async fn set_job_datasets(
        tx: &mut Transaction<'_, Sqlite>,
        job: u64,
        versions: &[(String, String)],
    ) -> Result<(), DbError> {
        sqlx::query("DELETE FROM job_datasets WHERE job_id = ?")
            .bind(job as i64)
            .execute(&mut **tx)
            .await?;
        for (name, version) in versions {
            sqlx::query("INSERT INTO job_datasets (job_id, name, version) VALUES (?, ?, ?)")
                .bind(job as i64)
                .bind(name)
                .bind(version)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// The versions given to jobs that are still staging or running.
    pub async fn active_job_datasets(
        &self,
    ) -> Result<BTreeMap<u64, Vec<(String, String)>>, DbError> {
        let rows = sqlx::query(
            "SELECT d.job_id, d.name, d.version FROM job_datasets d JOIN jobs j ON j.id = d.job_id \
             WHERE j.state IN ('STAGING', 'RUNNING') ORDER BY d.job_id, d.name",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out: BTreeMap<u64, Vec<(String, String)>> = BTreeMap::new();
        for r in rows {
            out.entry(r.try_get::<i64, _>(0)? as u64)
                .or_default()
                .push((r.try_get(1)?, r.try_get(2)?));
        }
        Ok(out)
    }
}
