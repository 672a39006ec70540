//! The state database: SQLite through sqlx, WAL mode, migrations embedded in the binary.
//! Every change the controller makes is committed here before it is acted on, so that a
//! controller killed at any moment restarts from what it had promised.
//!
//! This file opens the database and holds what its tables share; each domain's queries live in
//! its own folder (`jobs/rows.rs`, `jobs/store.rs`, `accounts/db.rs`, `nodes/db.rs`,
//! `datasets/db.rs`, `envs/db.rs`, `quotas/db.rs`).

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A database error, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Opening or migrating failed.
    #[error("cannot open the state database {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The database's migrations are not this binary's: it is from a newer labpool, or a
    /// migration it ran differs from this binary's.
    #[error("cannot open the state database {path}: {mismatch}")]
    Schema {
        /// The file.
        path: PathBuf,
        /// How it differs.
        mismatch: crate::schema::Mismatch,
    },
    /// A query failed.
    #[error("state database: {0}")]
    Query(#[from] sqlx::Error),
    /// The database is gone or empty, but the state directory held a pool: starting would
    /// silently forget every job, account and ledger entry.
    #[error(
        "the state database {path} is {what}, but this state directory held a pool (since {since}); labpool will not start an empty pool over it. Restore labpool.db from your backup (a snapshot of the state directory, or the copy an admin keeps), or, to start an empty pool on purpose, remove {marker}"
    )]
    Lost {
        /// The database file.
        path: PathBuf,
        /// `missing` or `empty (0 bytes)`.
        what: &'static str,
        /// When the pool was first started, as the marker records it.
        since: String,
        /// The marker file to remove.
        marker: PathBuf,
    },
    /// A stored value did not decode.
    #[error("state database holds a bad value in job {job}: {what}")]
    Corrupt {
        /// The job.
        job: i64,
        /// What.
        what: String,
    },
}

/// Beside the database, written once it holds a pool: a database that is later missing or
/// empty while this file is there was lost, not new.
pub const POOL_MARKER: &str = "pool-started";

/// The state database.
#[derive(Clone)]
pub struct Db {
    pub(crate) pool: SqlitePool,
}

/// The states of jobs that are not finished.
pub const ACTIVE_STATES: &str = "('PENDING', 'STAGING', 'RUNNING')";

impl Db {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub async fn open(path: &Path) -> Result<Db, DbError> {
        let marker = path.with_file_name(POOL_MARKER);
        let size = std::fs::metadata(path).map(|m| m.len()).ok();
        if size.is_none_or(|s| s == 0)
            && let Ok(since) = std::fs::read_to_string(&marker)
        {
            return Err(DbError::Lost {
                path: path.to_path_buf(),
                what: if size.is_none() {
                    "missing"
                } else {
                    "empty (0 bytes)"
                },
                since: since.trim().to_string(),
                marker,
            });
        }
        let open_err = |e: Box<dyn std::error::Error + Send + Sync>| DbError::Open {
            path: path.to_path_buf(),
            source: e,
        };
        make_private(path).map_err(|e| open_err(Box::new(e)))?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|e| open_err(Box::new(e)))?;
        crate::schema::migrator().run(&pool).await.map_err(
            |e| match crate::schema::Mismatch::of(&e) {
                Some(m) => DbError::Schema {
                    path: path.to_path_buf(),
                    mismatch: m,
                },
                None => open_err(Box::new(e)),
            },
        )?;
        if !marker.exists() {
            let since = crate::clock::rfc3339(crate::clock::now_ms());
            std::fs::write(&marker, format!("{since}\n")).map_err(|e| open_err(Box::new(e)))?;
        }
        Ok(Db { pool })
    }

    /// Writes one row and commits: an error means the database cannot take writes now.
    pub async fn probe_write(&self) -> Result<(), DbError> {
        sqlx::query("INSERT OR REPLACE INTO storage_probe (id, at) VALUES (1, ?)")
            .bind(crate::clock::now_ms())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Starts a transaction.
    pub async fn begin(&self) -> Result<Transaction<'static, Sqlite>, DbError> {
        Ok(self.pool.begin().await?)
    }
}

/// GPU indexes as the `gpus` column stores them: `0,2`.
pub(crate) fn gpu_column(gpus: &[u32]) -> String {
    gpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Creates the database file readable by its owner only, or makes an existing one so, with its
/// WAL files: jobs' environments (tokens, keys) are stored in it.
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}
