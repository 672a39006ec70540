//! The controller's side of snapshots: the open repository, restores in flight (polled for
//! progress), and the scheduled backups with retention after each.
//!
//! Members' reads and restores come here, where the caller's uid is known from the socket;
//! admin maintenance (`create`, `forget`, `prune`, `check`) runs in the CLI as root. Both take
//! the repository's flock, so a scheduled backup and a manual one never overlap.

use crate::clock::Clock;
use crate::db::Db;
use crate::retry::backoff_within;
use crate::schedule::Schedule;
use crate::settings::{Config, SnapshotSource};
use crate::timers::{Task, Timers};
use backon::BlockingRetryable;
use chrono::{Local, Offset, Utc};
use labpool_snapshots::restore::RestoreReport;
use labpool_snapshots::{BackupOptions, Progress, Repository, SnapshotError};
use labpool_units::format_size;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A restore running on a blocking thread.
pub struct RestoreTask {
    /// Who asked for it (only they, and admins, may follow it).
    pub uid: u32,
    /// Live counters.
    pub progress: Progress,
    /// Set when it ends.
    pub outcome: Mutex<Option<Result<RestoreReport, String>>>,
}

/// Snapshot state shared by the API handlers and the timer.
pub struct SnapshotService {
    config: Arc<Config>,
    repo: Mutex<Option<(Arc<Repository>, IndexIdentity)>>,
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

    /// The config.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The repository, opened on first use; `Ok(None)` while none has been created. It is
    /// opened again when its index file was replaced (`check --rebuild-index` by an admin).
    pub fn repo(&self) -> Result<Option<Arc<Repository>>, SnapshotError> {
        let path = self.config.snapshot_repo();
        let index = index_identity(&path);
        let mut slot = self.repo.lock().unwrap();
        if let Some((r, seen)) = slot.as_ref()
            && *seen == index
        {
            return Ok(Some(r.clone()));
        }
        if !path.join("config.json").exists() {
            return Ok(None);
        }
        let r = Arc::new(Repository::open(&path)?);
        *slot = Some((r.clone(), index_identity(&path)));
        Ok(Some(r))
    }

    /// The repository, created when missing (for backups).
    fn repo_or_init(&self) -> Result<Arc<Repository>, SnapshotError> {
        if let Some(r) = self.repo()? {
            return Ok(r);
        }
        open_or_init(&self.config.snapshot_repo())?;
        Ok(self.repo()?.expect("the repository was just created"))
    }

    /// Runs `f` on the repository under its read lock, so a forget or prune cannot remove
    /// data under a listing or restore; pack handles are let go afterwards, so packs an
    /// admin's prune deleted do not stay allocated. A forget or prune in progress (the
    /// retention after each scheduled backup) is waited for, up to a minute, rather than
    /// turning a member's listing into an error.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&Repository) -> Result<T, SnapshotError>,
    ) -> Result<Option<T>, SnapshotError> {
        let Some(repo) = self.repo()? else {
            return Ok(None);
        };
        let every = Duration::from_millis(50);
        let lock = (|| repo.lock(labpool_snapshots::LockMode::Read))
            .retry(backoff_within(every, every, Duration::from_secs(60)))
            .when(|e| matches!(e, SnapshotError::Busy { .. }))
            .call()?;
        let out = f(&repo);
        drop(lock);
        repo.drop_pack_handles();
        out.map(Some)
    }

    /// Registers a new restore and returns its id.
    pub fn start_restore(&self, uid: u32) -> (u64, Arc<RestoreTask>) {
        let id = self.next_restore.fetch_add(1, Ordering::Relaxed);
        let task = Arc::new(RestoreTask {
            uid,
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
            "snapshot {} of {}: {}, {}, {} added, {} unreadable",
            s.short_id(),
            src.name,
            labpool_units::count(s.files, "file"),
            format_size(s.bytes),
            format_size(s.added_bytes),
            s.errors
        );
        // The backup stands whatever happens to retention: a retention that cannot run now
        // (the repository stayed busy) is said in the log and applied after the next backup.
        match self.apply_retention(&repo) {
            Ok(Some(text)) => summary += &text,
            Ok(None) => {}
            Err(e) => summary += &format!("; retention postponed to the next backup: {e}"),
        }
        Ok(summary)
    }
}

impl SnapshotService {
    /// Forgets by the config's policy and prunes what that freed; `None` when nothing went.
    fn apply_retention(&self, repo: &Repository) -> Result<Option<String>, SnapshotError> {
        let policy = self.config.snapshot_policy();
        if policy.is_empty() {
            return Ok(None);
        }
        let tz = Local::now().offset().fix();
        let verdicts = when_free(|| labpool_snapshots::prune::forget(repo, &policy, tz, false))?;
        let forgotten = verdicts.iter().filter(|v| !v.keep).count();
        if forgotten == 0 {
            return Ok(None);
        }
        let p = when_free(|| labpool_snapshots::prune::prune(repo, false, &Progress::default()))?;
        Ok(Some(format!(
            "; forgot {forgotten} by retention, pruned {}",
            format_size(p.bytes_before.saturating_sub(p.bytes_after))
        )))
    }
}

/// Retries `f` while the repository is busy (members' restores hold it for reading) for up to
/// ten minutes: retention must not be skipped because someone was restoring at 03:00.
fn when_free<T>(f: impl FnMut() -> Result<T, SnapshotError>) -> Result<T, SnapshotError> {
    let every = Duration::from_secs(5);
    f.retry(backoff_within(every, every, Duration::from_secs(600)))
        .when(|e| matches!(e, SnapshotError::Busy { .. }))
        .call()
}

/// The index file's device and inode: they change when it is rebuilt.
type IndexIdentity = Option<(u64, u64)>;

fn index_identity(repo: &Path) -> IndexIdentity {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(repo.join("index.sqlite"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
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

/// The scheduled backups: one task per source, one source at a time, so two backups never
/// overlap. Their last runs are kept in `STATE_DIR/snapshot-timer.json`.
pub fn timers(service: Arc<SnapshotService>, db: Db, clock: Arc<dyn Clock>) -> Timers {
    let config = service.config.clone();
    let mut tasks = vec![state_task(service.clone(), db.clone())];
    if config.snapshots.enabled {
        for src in config.snapshot_sources() {
            let Ok(schedule) = Schedule::parse(&src.schedule) else {
                continue;
            };
            let service = service.clone();
            let name = src.name.clone();
            tasks.push(Task {
                name,
                schedule,
                run: Box::new(move || {
                    let (svc, src) = (service.clone(), src.clone());
                    Box::pin(async move {
                        if !src.path.exists() {
                            tracing::warn!(source = %src.name, path = %src.path.display(), "snapshot source does not exist; skipped");
                            return Ok(format!("skipped: {} does not exist", src.path.display()));
                        }
                        match tokio::task::spawn_blocking(move || svc.run_source(&src)).await {
                            Ok(result) => result.map_err(|e| e.to_string()),
                            Err(e) => Err(format!("the snapshot panicked: {e}")),
                        }
                    })
                }),
            });
        }
        tasks.extend(super::copy::copy_task(service.clone(), db));
    } else {
        tracing::info!("scheduled snapshots are off ([snapshots] enabled = false)");
    }
    Timers {
        name: "snapshots",
        state_file: config.controller.state_dir.join(TIMER_STATE),
        tasks,
        clock,
    }
}

/// The nightly backup of the controller's own state into `STATE_DIR/backup`
/// (`labpool state backup`), first of the night's tasks; with snapshots on, it is also
/// snapshotted into the repository as this source, so the off-box copy carries it.
pub const STATE_TASK: &str = "labpool-state";

fn state_task(service: Arc<SnapshotService>, db: Db) -> Task {
    let schedule = Schedule::parse(&crate::settings::default_snapshot_schedule())
        .expect("the default snapshot schedule parses");
    Task {
        name: STATE_TASK.to_string(),
        schedule,
        run: Box::new(move || {
            let (service, db) = (service.clone(), db.clone());
            Box::pin(async move {
                let b = crate::state_backup::nightly(&db, service)
                    .await
                    .map_err(|e| match e.body.hint {
                        Some(hint) => format!("{} ({hint})", e.body.error),
                        None => e.body.error,
                    })?;
                let mut done = format!("state backed up: {} jobs into {}", b.jobs, b.dir.display());
                if let Some(snapshot) = b.snapshot {
                    done += &format!("; {snapshot}");
                }
                Ok(done)
            })
        }),
    }
}

/// Where the snapshot timer keeps its last runs, in the state directory.
pub const TIMER_STATE: &str = "snapshot-timer.json";

/// One snapshot source's scheduled runs, as the timer recorded them.
pub struct SourceRuns {
    /// The source.
    pub name: String,
    /// Its last successful run, ms.
    pub last_ok_ms: Option<i64>,
    /// Its last run's failure, while it has not succeeded since.
    pub failure: Option<crate::timers::Failure>,
}

/// The nightly state backup's runs ([`STATE_TASK`]), then each configured source's (none when
/// scheduled snapshots are off).
pub fn runs(config: &Config) -> Vec<SourceRuns> {
    let (mut last, mut failed) =
        crate::timers::read_runs(&config.controller.state_dir.join(TIMER_STATE));
    let sources = if config.snapshots.enabled {
        config.snapshot_sources()
    } else {
        Vec::new()
    };
    std::iter::once(STATE_TASK.to_string())
        .chain(sources.into_iter().map(|src| src.name))
        .map(|name| SourceRuns {
            last_ok_ms: last.remove(&name).map(|t| t.timestamp_millis()),
            failure: failed.remove(&name),
            name,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The night's first task writes a state backup the doctor and the alerts then see, even
    /// with scheduled snapshots off.
    #[tokio::test]
    async fn the_nightly_state_backup_writes_a_copy_and_is_reported_as_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let text = "[controller]\nstate_dir = \"state\"\nsocket = \"lp.sock\"\n[snapshots]\nenabled = false\n";
        let path = dir.path().join("labpool.toml");
        std::fs::write(&path, text).unwrap();
        let config = Arc::new(Config::load(&path).unwrap());
        std::fs::create_dir_all(&config.controller.state_dir).unwrap();
        let db = Db::open(&config.database_path()).await.unwrap();
        let task = state_task(SnapshotService::new(config.clone()), db);
        assert_eq!(task.name, STATE_TASK);
        let said = (task.run)().await.unwrap();
        assert!(said.starts_with("state backed up: 0 jobs"), "{said}");
        let copy = config.controller.state_dir.join("backup/labpool.db");
        assert!(std::fs::metadata(&copy).unwrap().len() > 0);
        let names: Vec<String> = runs(&config).into_iter().map(|r| r.name).collect();
        assert_eq!(names, [STATE_TASK]);
    }
}
