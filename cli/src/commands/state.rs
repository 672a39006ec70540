//! `labpool state backup` and `labpool state restore`: the controller's own state (accounts,
//! the credit ledger, the job history, reservations, the datasets' registry) copied while it
//! runs, and put back on this machine or a new one. The copy is SQLite's own (`VACUUM INTO`,
//! in the controller): a file copy of `labpool.db` misses what is still in its write-ahead log.

use crate::api::state::{StateBackup, StateBackupRequest};
use crate::args::StateCommand;
use crate::client::Client;
use crate::render::print;
use crate::settings::Config;
use anyhow::Context;
use std::path::Path;

/// Runs `labpool state …`.
pub async fn run(command: &StateCommand, config: &Config) -> anyhow::Result<()> {
    match command {
        StateCommand::Backup { to, json } => {
            let req = StateBackupRequest { to: to.clone() };
            let done: StateBackup = Client::new(&config.controller.socket)
                .post("/v1/state/backup", &req)
                .await?;
            print(*json, &done, |b| {
                let files: Vec<String> = b
                    .files
                    .iter()
                    .map(|(name, bytes)| format!("{name} ({})", labpool_units::format_size(*bytes)))
                    .collect();
                let snapshot = match &b.snapshot {
                    Some(s) => format!(
                        "\ninto the snapshot repository too ({s}): the off-box copy carries it; restore from a copy with: labpool state restore --from-repo REPO"
                    ),
                    None => String::new(),
                };
                format!(
                    "backed up {} jobs into {}: {}{snapshot}\nrestore with: labpool state restore {}",
                    b.jobs,
                    b.dir.display(),
                    files.join(", "),
                    b.dir.display()
                )
            });
            Ok(())
        }
        StateCommand::Restore { .. } => unreachable!("restore runs before a config is read"),
    }
}

/// Puts `from/labpool.db` in place as this config's state database. The controller must be
/// stopped; a database already there stays unless `force`.
/// Where a restore takes its backup from.
pub enum Source<'a> {
    /// A backup's directory.
    Dir(&'a Path),
    /// The newest (or `--at`) `labpool-state` snapshot in a snapshot repository directory.
    Repo(&'a Path, Option<&'a str>),
}

/// `labpool state restore`: the backup found (unpacked from a repository into a private
/// temporary directory), the config put in place where there is none, then the database.
pub async fn restore_command(
    source: Source<'_>,
    force: bool,
    explicit: Option<&Path>,
) -> anyhow::Result<()> {
    let unpacked;
    let dir = match source {
        Source::Dir(dir) => dir.to_path_buf(),
        Source::Repo(repo, at) => {
            unpacked = tempfile::Builder::new()
                .prefix("labpool-state-")
                .tempdir_in(std::env::temp_dir())
                .context("cannot make a private temporary directory")?;
            crate::commands::snapshots::copies::state_from_repo(repo, at, unpacked.path()).await?
        }
    };
    config_from_backup(&dir, explicit)?;
    let config = Config::locate(explicit)?;
    restore(&dir, force, &config).await
}

/// On a machine with no config yet (a new one, or after a purge), `state restore` first puts
/// the backup's `labpool.toml` where this command looks for it (`--config`, else the default
/// path; mode 0644: members read it) and its `cluster.key` where that config names it (mode
/// 0600), so that a pool comes back from the copy alone. An existing config is never replaced.
pub fn config_from_backup(from: &Path, explicit: Option<&Path>) -> anyhow::Result<()> {
    let target = explicit.unwrap_or(Path::new(crate::settings::DEFAULT_CONFIG_PATH));
    let saved = from.join("labpool.toml");
    if target.exists() || !saved.is_file() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&saved)
        .with_context(|| format!("cannot read {}", saved.display()))?;
    let config = Config::parse(&text, &std::path::absolute(target)?)
        .with_context(|| format!("the backup's config {} does not load", saved.display()))?;
    let key = config.cluster_key_path();
    let saved_key = from.join("cluster.key");
    for dir in [target.parent(), key.parent()].into_iter().flatten() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    crate::atomic_file::write_atomic(target, text.as_bytes(), 0o644, true)
        .with_context(|| format!("cannot write {}", target.display()))?;
    crate::out!(
        "restored the config {} from {}",
        target.display(),
        saved.display()
    );
    if saved_key.is_file() && !key.exists() {
        let bytes = std::fs::read(&saved_key)
            .with_context(|| format!("cannot read {}", saved_key.display()))?;
        crate::atomic_file::write_atomic(&key, &bytes, 0o600, true)
            .with_context(|| format!("cannot write {}", key.display()))?;
        crate::out!("restored the cluster key {}", key.display());
    }
    Ok(())
}

async fn restore(from: &Path, force: bool, config: &Config) -> anyhow::Result<()> {
    let copy = from.join(crate::controller::state_backup::DB_FILE);
    if !copy.is_file() {
        anyhow::bail!(
            "no {} in {}: give the directory `labpool state backup` wrote (STATE_DIR/backup by default, or a snapshot of it)",
            crate::controller::state_backup::DB_FILE,
            from.display()
        );
    }
    let jobs = crate::controller::state_backup::count_jobs(&copy)
        .await
        .with_context(|| {
            format!(
                "{} is not a labpool state backup (no jobs table in a database)",
                copy.display()
            )
        })?;
    let socket = &config.controller.socket;
    if std::os::unix::net::UnixStream::connect(socket).is_ok() {
        anyhow::bail!(
            "the controller at {} is running: stop it first (systemctl stop labpool), then restore",
            socket.display()
        );
    }
    let target = config.database_path();
    let present = std::fs::metadata(&target).is_ok_and(|m| m.len() > 0);
    if present && !force {
        anyhow::bail!(
            "{} is there already: pass --force to replace it with the backup (keep a copy of it first)",
            target.display()
        );
    }
    let dir = &config.controller.state_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let bytes = std::fs::read(&copy).with_context(|| format!("cannot read {}", copy.display()))?;
    // What the old database's log held belongs to the old database.
    for suffix in ["-wal", "-shm"] {
        let mut side = target.as_os_str().to_owned();
        side.push(suffix);
        let _ = std::fs::remove_file(std::path::PathBuf::from(side));
    }
    crate::atomic_file::write_atomic(&target, &bytes, 0o600, true)
        .with_context(|| format!("cannot write {}", target.display()))?;
    crate::out!(
        "restored {jobs} jobs into {} from {}",
        target.display(),
        from.display()
    );
    crate::out!(
        "the config and the cluster key are beside it in {} (labpool.toml, cluster.key), for a new machine",
        from.display()
    );
    crate::out!(
        "next: labpool serve --config {} (running jobs are re-adopted from their nodes, or requeued)",
        config.path.display()
    );
    Ok(())
}
