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

/// Where a restore takes its backup from.
pub enum Source<'a> {
    /// A backup's directory.
    Dir(&'a Path),
    /// The newest (or `--at`) `labpool-state` snapshot in a snapshot repository directory.
    Repo(&'a Path, Option<&'a str>),
}

/// `labpool state restore`: the backup found (unpacked from a repository into a private
/// temporary directory) and checked, the controller found stopped and the database free, and
/// only then the config put in place where there is none, and the database. A restore that
/// fails leaves nothing written.
pub async fn restore_command(
    source: Source<'_>,
    force: bool,
    explicit: Option<&Path>,
) -> anyhow::Result<()> {
    let unpacked;
    let (dir, shown) = match source {
        Source::Dir(dir) => (dir.to_path_buf(), dir.display().to_string()),
        Source::Repo(repo, at) => {
            unpacked = tempfile::Builder::new()
                .prefix("labpool-state-")
                .tempdir_in(std::env::temp_dir())
                .context("cannot make a private temporary directory")?;
            crate::commands::snapshots::copies::state_from_repo(repo, at, unpacked.path()).await?
        }
    };
    let (copy, jobs) = checked_backup(&dir).await?;
    let planned = planned_config(&dir, explicit)?;
    let config = match &planned {
        Some(p) => p.config.clone(),
        None => Config::locate(explicit)?,
    };
    let target = free_target(&config, force)?;
    if let Some(p) = planned {
        p.write()?;
    }
    let bytes = std::fs::read(&copy).with_context(|| format!("cannot read {}", copy.display()))?;
    let state_dir = &config.controller.state_dir;
    std::fs::create_dir_all(state_dir)
        .with_context(|| format!("cannot create {}", state_dir.display()))?;
    // What the old database's log held belongs to the old database.
    for suffix in ["-wal", "-shm"] {
        let mut side = target.as_os_str().to_owned();
        side.push(suffix);
        let _ = std::fs::remove_file(std::path::PathBuf::from(side));
    }
    crate::atomic_file::write_atomic(&target, &bytes, 0o600, true)
        .with_context(|| format!("cannot write {}", target.display()))?;
    crate::out!(
        "restored {jobs} jobs into {} from {shown}",
        target.display()
    );
    let unit = ["/etc/systemd/system", "/lib/systemd/system"]
        .iter()
        .any(|d| Path::new(d).join("labpool.service").exists());
    if unit && Path::new("/run/systemd/system").is_dir() {
        crate::out!(
            "next: sudo systemctl start labpool (running jobs are re-adopted from their nodes, or requeued)"
        );
    } else {
        crate::out!(
            "next: labpool serve --config {} (running jobs are re-adopted from their nodes, or requeued)",
            config.path.display()
        );
    }
    Ok(())
}

/// The backup's database, checked to be one, and its job count.
async fn checked_backup(from: &Path) -> anyhow::Result<(std::path::PathBuf, u64)> {
    let copy = from.join(crate::controller::state_backup::DB_FILE);
    if !copy.is_file() {
        anyhow::bail!(
            "no {} in {}: give the directory `labpool state backup` wrote (STATE_DIR/backup by default), or --from-repo REPO",
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
    Ok((copy, jobs))
}

/// Where the database goes: refused while the controller runs, or over a database that is
/// there unless `force`.
fn free_target(config: &Config, force: bool) -> anyhow::Result<std::path::PathBuf> {
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
    Ok(target)
}

/// The backup's config, to be put where this command looks for one.
struct PlannedConfig {
    config: Config,
    text: String,
    saved: std::path::PathBuf,
    key: Option<Vec<u8>>,
}

impl PlannedConfig {
    fn write(self) -> anyhow::Result<()> {
        let target = &self.config.path;
        let key = self.config.cluster_key_path();
        for dir in [target.parent(), key.parent()].into_iter().flatten() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        crate::atomic_file::write_atomic(target, self.text.as_bytes(), 0o644, true)
            .with_context(|| format!("cannot write {}", target.display()))?;
        crate::out!(
            "restored the config {} from {}",
            target.display(),
            self.saved.display()
        );
        if let Some(bytes) = self.key.filter(|_| !key.exists()) {
            crate::atomic_file::write_atomic(&key, &bytes, 0o600, true)
                .with_context(|| format!("cannot write {}", key.display()))?;
            crate::out!("restored the cluster key {}", key.display());
        }
        Ok(())
    }
}

/// On a machine with no config yet (a new one, or after a purge), the backup's `labpool.toml`
/// goes where this command looks for it (`--config`, else the default path; mode 0644: members
/// read it) and its `cluster.key` where that config names it (mode 0600), so that a pool comes
/// back from the copy alone. An existing config is never replaced: `None` then.
fn planned_config(from: &Path, explicit: Option<&Path>) -> anyhow::Result<Option<PlannedConfig>> {
    let target = explicit.unwrap_or(Path::new(crate::settings::DEFAULT_CONFIG_PATH));
    let saved = from.join("labpool.toml");
    if target.exists() || !saved.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&saved)
        .with_context(|| format!("cannot read {}", saved.display()))?;
    let config = Config::parse(&text, &std::path::absolute(target)?)
        .with_context(|| format!("the backup's config {} does not load", saved.display()))?;
    let saved_key = from.join("cluster.key");
    let key = if saved_key.is_file() {
        Some(
            std::fs::read(&saved_key)
                .with_context(|| format!("cannot read {}", saved_key.display()))?,
        )
    } else {
        None
    };
    Ok(Some(PlannedConfig {
        config,
        text,
        saved,
        key,
    }))
}
