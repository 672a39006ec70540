//! The controller's own state, backed up while it runs: SQLite's `VACUUM INTO` writes a
//! consistent copy of the database (a plain file copy of `labpool.db` misses what is still in
//! its write-ahead log, often everything), and the config and the cluster key go beside it.
//! `labpool state restore` puts the copy back (`cli/src/commands/state.rs`).

use crate::api::state::{StateBackup, StateBackupRequest};
use crate::db::Db;
use crate::error::ApiError;
use crate::http::{AppState, admin_only, body, caller};
use crate::socket::Peer;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, State};
use axum::routing::post;
use axum::{Json, Router};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The backup's database file.
pub const DB_FILE: &str = "labpool.db";

/// The route: `POST /v1/state/backup` (admins).
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/state/backup", post(backup))
}

async fn backup(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Result<Json<StateBackupRequest>, JsonRejection>,
) -> Result<Json<StateBackup>, ApiError> {
    let caller = caller(&state, &peer)?;
    admin_only(&state.config, &caller, "back up the pool's state")?;
    let req = body(req)?;
    match req.to {
        Some(to) => Ok(Json(write(&state.db, &state.config, &to).await?)),
        None => Ok(Json(nightly(&state.db, state.snapshots.clone()).await?)),
    }
}

/// The nightly backup, also `labpool state backup` without `--to`: into `STATE_DIR/backup`,
/// then (with snapshots on) into the snapshot repository.
pub async fn nightly(
    db: &Db,
    service: std::sync::Arc<crate::snapshots::SnapshotService>,
) -> Result<StateBackup, ApiError> {
    let config = service.config().clone();
    let dir = config.controller.state_dir.join("backup");
    let mut done = write(db, &config, &dir).await?;
    done.snapshot = into_repository(service, dir.clone()).await.map_err(|e| {
        ApiError::internal(format!(
            "backed up into {}, but not into the snapshot repository: {e}",
            dir.display()
        ))
    })?;
    Ok(done)
}

/// Snapshots the backup in `dir` into the snapshot repository as the source `labpool-state`,
/// when snapshots are on, so that the off-box copy carries it; what the snapshot took.
async fn into_repository(
    service: std::sync::Arc<crate::snapshots::SnapshotService>,
    dir: PathBuf,
) -> Result<Option<String>, String> {
    if !service.config().snapshots.enabled {
        return Ok(None);
    }
    let source = crate::settings::SnapshotSource {
        name: crate::snapshots::service::STATE_TASK.to_string(),
        path: dir,
        schedule: crate::settings::default_snapshot_schedule(),
        exclude: Vec::new(),
        one_file_system: true,
    };
    match tokio::task::spawn_blocking(move || service.run_source(&source)).await {
        Ok(r) => r.map(Some).map_err(|e| e.to_string()),
        Err(e) => Err(format!("the snapshot panicked: {e}")),
    }
}

/// Writes the backup into `dir`: the database copy, then the config and the key.
pub async fn write(
    db: &Db,
    config: &crate::settings::Config,
    dir: &Path,
) -> Result<StateBackup, ApiError> {
    let bad = |what: String| {
        ApiError::bad_request(
            what,
            Some("give --to a directory the controller can write, outside the state directory's database files".into()),
        )
    };
    if !dir.is_absolute() {
        return Err(bad(format!("{}: give an absolute path", dir.display())));
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(bad(format!(
                "{} exists and is not a directory",
                dir.display()
            )));
        }
        Ok(_) => {}
        Err(_) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| bad(format!("cannot create {}: {e}", dir.display())))?,
    }
    let target = dir.join(DB_FILE);
    let partial = dir.join(format!("{DB_FILE}.partial"));
    let _ = std::fs::remove_file(&partial);
    sqlx::query("VACUUM INTO ?")
        .bind(partial.to_string_lossy().into_owned())
        .execute(&db.pool)
        .await
        .map_err(|e| {
            ApiError::internal(format!(
                "cannot copy the state database into {}: {e}",
                partial.display()
            ))
        })?;
    private(&partial)?;
    std::fs::rename(&partial, &target)
        .map_err(|e| ApiError::internal(format!("cannot rename {}: {e}", partial.display())))?;
    let jobs = count_jobs(&target).await.map_err(|e| {
        ApiError::internal(format!(
            "the copy {} is not readable: {e}",
            target.display()
        ))
    })?;
    let mut files = vec![(DB_FILE.to_string(), size(&target))];
    let beside: [(&str, PathBuf); 2] = [
        ("labpool.toml", config.path.clone()),
        ("cluster.key", config.cluster_key_path()),
    ];
    for (name, from) in beside {
        if !from.exists() {
            continue;
        }
        let to = dir.join(name);
        let bytes = std::fs::read(&from)
            .map_err(|e| ApiError::internal(format!("cannot read {}: {e}", from.display())))?;
        crate::atomic_file::write_atomic(&to, &bytes, 0o600, true)
            .map_err(|e| ApiError::internal(format!("cannot write {}: {e}", to.display())))?;
        files.push((name.to_string(), bytes.len() as u64));
    }
    tracing::info!(dir = %dir.display(), jobs, "state backed up");
    Ok(StateBackup {
        dir: dir.to_path_buf(),
        files,
        jobs,
        snapshot: None,
    })
}

fn private(path: &Path) -> Result<(), ApiError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| ApiError::internal(format!("cannot make {} private: {e}", path.display())))
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Jobs in a database copy, read from the copy itself (read-only): a copy without its jobs
/// table is no backup. The backup checks what it wrote with it, and the restore what it reads.
pub async fn count_jobs(copy: &Path) -> Result<u64, sqlx::Error> {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(copy)
        .read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM jobs")
        .fetch_one(&mut conn)
        .await?;
    let _ = conn.close().await;
    Ok(n as u64)
}
