//! The controller's side of snapshots: the open repository, restores in flight (polled for
//! progress), and the scheduled backups with retention after each.
//!
//! Members' reads and restores come here, where the caller's uid is known from the socket;
//! admin maintenance (`create`, `forget`, `prune`, `check`) runs in the CLI as root. Both take
//! the repository's flock, so a scheduled backup and a manual one never overlap.

use crate::schedule::Schedule;
use crate::settings::{Config, SnapshotSource};
use chrono::{DateTime, Local, Offset, Utc};
use labpool_snapshots::restore::RestoreReport;
use labpool_snapshots::{BackupOptions, Progress, Repository, SnapshotError};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// A restore running on a blocking thread.
pub struct RestoreTask {
    /// Live counters.
    pub progress: Progress,
    /// Set when it ends.
    pub outcome: Mutex<Option<Result<RestoreReport, String>>>,
}

/// Snapshot state shared by the API handlers and the timer.
pub struct SnapshotService {
    config: Arc<Config>,
    repo: Mutex<Option<Arc<Repository>>>,
    restores: Mutex<BTreeMap<u64, Arc<RestoreTask>>>,
    next_restore: AtomicU64,
}

/// Finished restores are kept this long for a last poll.
const KEEP_FINISHED: usize = 64;

impl SnapshotService {
    /// A service for the repository named in `config`.
    pub fn new(config: Arc<Config>) -> Arc<SnapshotService> {
        Arc::new(SnapshotService {
            config,
            repo: Mutex::new(None),
            restores: Mutex::new(BTreeMap::new()),
            next_restore: AtomicU64::new(1),
        })
    }

    /// The repository, opened on first use; `Ok(None)` while none has been created.
    pub fn repo(&self) -> Result<Option<Arc<Repository>>, SnapshotError> {
        let mut slot = self.repo.lock().unwrap();
        if let Some(r) = slot.as_ref() {
            return Ok(Some(r.clone()));
        }
        let path = self.config.snapshot_repo();
        if !path.join("config.json").exists() {
            return Ok(None);
        }
        let r = Arc::new(Repository::open(&path)?);
        *slot = Some(r.clone());
        Ok(Some(r))
    }

    /// The repository, created when missing (for backups).
    fn repo_or_init(&self) -> Result<Arc<Repository>, SnapshotError> {
        if let Some(r) = self.repo()? {
            return Ok(r);
        }
        let r = Arc::new(open_or_init(&self.config.snapshot_repo())?);
        *self.repo.lock().unwrap() = Some(r.clone());
        Ok(r)
    }

    /// Registers a new restore and returns its id.
    pub fn start_restore(&self) -> (u64, Arc<RestoreTask>) {
        let id = self.next_restore.fetch_add(1, Ordering::Relaxed);
        let task = Arc::new(RestoreTask {
            progress: Progress::default(),
            outcome: Mutex::new(None),
        });
        let mut all = self.restores.lock().unwrap();
        while all.len() >= KEEP_FINISHED {
            let done = all
                .iter()
                .find(|(_, t)| t.outcome.lock().unwrap().is_some())
                .map(|(k, _)| *k);
            match done {
                Some(k) => all.remove(&k),
                None => break,
            };
        }
        all.insert(id, task.clone());
        (id, task)
    }

    /// A restore by id.
    pub fn restore(&self, id: u64) -> Option<Arc<RestoreTask>> {
        self.restores.lock().unwrap().get(&id).cloned()
    }

    /// Backs up one source, then applies the retention policy and prunes.
    pub fn run_source(&self, src: &SnapshotSource) -> Result<String, SnapshotError> {
        if !src.path.is_dir() {
            return Err(SnapshotError::Invalid(format!(
                "source {} ({}) is not a directory; create it or fix [[snapshots.source]] in {}",
                src.name,
                src.path.display(),
                self.config.path.display()
            )));
        }
        let repo = self.repo_or_init()?;
        let r = labpool_snapshots::create(&repo, &backup_options(src), &Progress::default())?;
        let s = &r.snapshot;
        let mut summary = format!(
            "snapshot {} of {}: {} files, {} bytes, {} bytes added, {} unreadable",
            s.short_id(),
            src.name,
            s.files,
            s.bytes,
            s.added_bytes,
            s.errors
        );
        let policy = self.config.snapshot_policy();
        if !policy.is_empty() {
            let tz = Local::now().offset().fix();
            let verdicts = labpool_snapshots::prune::forget(&repo, &policy, tz, false)?;
            let forgotten = verdicts.iter().filter(|v| !v.keep).count();
            if forgotten > 0 {
                let p = labpool_snapshots::prune::prune(&repo, false, &Progress::default())?;
                summary += &format!(
                    "; forgot {forgotten} by retention, pruned {} bytes",
                    p.bytes_before.saturating_sub(p.bytes_after)
                );
            }
        }
        Ok(summary)
    }
}

/// Opens the repository at `path`, creating it (mode 0700) when there is none.
pub fn open_or_init(path: &Path) -> Result<Repository, SnapshotError> {
    if path.join("config.json").exists() {
        Repository::open(path)
    } else {
        Repository::init(path)
    }
}

/// The backup options for a configured source, now.
pub fn backup_options(src: &SnapshotSource) -> BackupOptions {
    BackupOptions {
        source: src.name.clone(),
        path: src.path.clone(),
        excludes: src.exclude.clone(),
        one_file_system: src.one_file_system,
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "localhost".into()),
        time: Utc::now(),
    }
}

/// When the timer last looked, kept across restarts so a run missed while the controller was
/// down is caught up at start-up (once, not once per missed night).
fn timer_file(config: &Config) -> std::path::PathBuf {
    config.controller.state_dir.join("snapshot-timer.json")
}

fn read_last_checked(config: &Config) -> Option<DateTime<Utc>> {
    let text = std::fs::read_to_string(timer_file(config)).ok()?;
    serde_json::from_str::<DateTime<Utc>>(&text).ok()
}

fn write_last_checked(config: &Config, t: DateTime<Utc>) {
    let _ = std::fs::write(timer_file(config), serde_json::to_string(&t).unwrap());
}

/// Runs scheduled backups until `stop`. One source at a time, so two backups never overlap.
pub async fn timer(service: Arc<SnapshotService>, mut stop: watch::Receiver<bool>) {
    let config = service.config.clone();
    if !config.snapshots.enabled {
        tracing::info!("scheduled snapshots are off ([snapshots] enabled = false)");
        return;
    }
    let schedules: Vec<(SnapshotSource, Schedule)> = config
        .snapshot_sources()
        .into_iter()
        .filter_map(|s| Schedule::parse(&s.schedule).ok().map(|c| (s, c)))
        .collect();
    let mut last = read_last_checked(&config).unwrap_or_else(Utc::now);
    loop {
        let now = Utc::now();
        for (src, sched) in &schedules {
            if sched.due(last, now).is_none() {
                continue;
            }
            if !src.path.exists() {
                tracing::warn!(source = %src.name, path = %src.path.display(), "snapshot source does not exist; skipped");
                continue;
            }
            let svc = service.clone();
            let s = src.clone();
            match tokio::task::spawn_blocking(move || svc.run_source(&s)).await {
                Ok(Ok(summary)) => tracing::info!(source = %src.name, "{summary}"),
                Ok(Err(e)) => tracing::error!(source = %src.name, "scheduled snapshot failed: {e}"),
                Err(e) => tracing::error!(source = %src.name, "scheduled snapshot panicked: {e}"),
            }
        }
        last = now;
        write_last_checked(&config, last);
        let next = schedules
            .iter()
            .filter_map(|(_, s)| s.next(Utc::now()))
            .min()
            .map(|t| (t - Utc::now()).to_std().unwrap_or_default())
            .unwrap_or(Duration::from_secs(60))
            .min(Duration::from_secs(60));
        tokio::select! {
            _ = tokio::time::sleep(next + Duration::from_millis(50)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
