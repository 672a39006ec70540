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
use labpool_units::format_size;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let lock = loop {
            match repo.lock(labpool_snapshots::LockMode::Read) {
                Err(SnapshotError::Busy { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => break other?,
            }
        };
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
            "snapshot {} of {}: {} files, {}, {} added, {} unreadable",
            s.short_id(),
            src.name,
            s.files,
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
fn when_free<T>(mut f: impl FnMut() -> Result<T, SnapshotError>) -> Result<T, SnapshotError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    loop {
        match f() {
            Err(SnapshotError::Busy { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_secs(5));
            }
            r => return r,
        }
    }
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

/// When the timer last ran each source, kept across restarts so a run missed while the
/// controller was down is caught up at start-up (once, not once per missed night).
fn timer_file(config: &Config) -> std::path::PathBuf {
    config.controller.state_dir.join("snapshot-timer.json")
}

/// Per source, when it last ran (or was found due and skipped). A file holding one time
/// applies to every source.
fn read_timer(config: &Config) -> Option<BTreeMap<String, DateTime<Utc>>> {
    let text = std::fs::read_to_string(timer_file(config)).ok()?;
    if let Ok(all) = serde_json::from_str::<DateTime<Utc>>(&text) {
        return Some(
            config
                .snapshot_sources()
                .into_iter()
                .map(|s| (s.name, all))
                .collect(),
        );
    }
    serde_json::from_str(&text).ok()
}

fn write_timer(config: &Config, last: &BTreeMap<String, DateTime<Utc>>) {
    let _ = std::fs::write(timer_file(config), serde_json::to_string(last).unwrap());
}

/// A failed scheduled run is tried again after this long (an admin's `check` may hold the
/// repository at 03:00), until it succeeds.
const RETRY_AFTER: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// Which sources run now: due since their last run, and not waiting to retry a failure.
fn due_now<'a>(
    schedules: &'a [(SnapshotSource, Schedule)],
    last: &BTreeMap<String, DateTime<Utc>>,
    retry_at: &BTreeMap<String, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<&'a SnapshotSource> {
    schedules
        .iter()
        .filter(|(src, sched)| {
            let since = last.get(&src.name).copied().unwrap_or(now);
            sched.due(since, now).is_some() && retry_at.get(&src.name).is_none_or(|t| now >= *t)
        })
        .map(|(src, _)| src)
        .collect()
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
    let started = Utc::now();
    let mut last = read_timer(&config).unwrap_or_default();
    for (src, _) in &schedules {
        last.entry(src.name.clone()).or_insert(started);
    }
    let mut retry_at: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    loop {
        let now = Utc::now();
        for src in due_now(&schedules, &last, &retry_at, now) {
            if !src.path.exists() {
                tracing::warn!(source = %src.name, path = %src.path.display(), "snapshot source does not exist; skipped");
                last.insert(src.name.clone(), now);
                continue;
            }
            let svc = service.clone();
            let s = src.clone();
            match tokio::task::spawn_blocking(move || svc.run_source(&s)).await {
                Ok(Ok(summary)) => {
                    tracing::info!(source = %src.name, "{summary}");
                    last.insert(src.name.clone(), now);
                    retry_at.remove(&src.name);
                }
                Ok(Err(e)) => {
                    tracing::error!(source = %src.name, "scheduled snapshot failed: {e}; trying again in 5 minutes");
                    retry_at.insert(src.name.clone(), now + RETRY_AFTER);
                }
                Err(e) => {
                    tracing::error!(source = %src.name, "scheduled snapshot panicked: {e}; trying again in 5 minutes");
                    retry_at.insert(src.name.clone(), now + RETRY_AFTER);
                }
            }
        }
        write_timer(&config, &last);
        let now = Utc::now();
        let next = schedules
            .iter()
            .filter_map(|(_, s)| s.next(now))
            .chain(retry_at.values().copied())
            .min()
            .map(|t| (t - now).to_std().unwrap_or_default())
            .unwrap_or(Duration::from_secs(60))
            .min(Duration::from_secs(60));
        tokio::select! {
            _ = tokio::time::sleep(next + Duration::from_millis(50)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_is_retried_after_a_pause_and_others_are_not_held_up() {
        let src = |name: &str, cron: &str| {
            (
                SnapshotSource {
                    name: name.into(),
                    path: "/x".into(),
                    schedule: cron.into(),
                    exclude: vec![],
                    one_file_system: true,
                },
                Schedule::parse(cron).unwrap(),
            )
        };
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        // Every minute (seconds field 0), so the test does not depend on the time zone.
        let schedules = vec![src("home", "0 * * * * *"), src("data", "0 * * * * *")];
        let mut last = BTreeMap::new();
        last.insert("home".to_string(), t("2026-12-03T03:00:00Z"));
        last.insert("data".to_string(), t("2026-12-03T03:00:30Z"));
        let names = |v: Vec<&SnapshotSource>| v.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        let mut retry = BTreeMap::new();
        let now = t("2026-12-03T03:01:10Z");
        assert_eq!(
            names(due_now(&schedules, &last, &retry, now)),
            vec!["home", "data"]
        );
        // home failed: not again until its retry time, though still due; data ran.
        retry.insert("home".to_string(), now + RETRY_AFTER);
        last.insert("data".to_string(), now);
        assert!(due_now(&schedules, &last, &retry, t("2026-12-03T03:02:10Z")).len() == 1);
        assert_eq!(
            names(due_now(
                &schedules,
                &last,
                &retry,
                t("2026-12-03T03:02:10Z")
            )),
            vec!["data"]
        );
        assert_eq!(
            names(due_now(
                &schedules,
                &last,
                &retry,
                t("2026-12-03T03:06:10Z")
            )),
            vec!["home", "data"]
        );
        // A source never seen before is not run at once: its first run is its next time.
        assert!(due_now(&schedules[..1], &BTreeMap::new(), &BTreeMap::new(), now).is_empty());
    }
}
