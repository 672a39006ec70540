//! The one timer service for the controller's scheduled work: snapshots of each source, the
//! quota scan, the scratch purge and the datasets audit. Every timer behaves the same way:
//!
//! - a task runs when its cron schedule fired since its last run;
//! - its last run is kept in a state file, so a run missed while the controller was down is
//!   caught up once at start (not once per missed night); a task never seen before first runs
//!   at its next time;
//! - a failed run is tried again after [`RETRY_AFTER`] until it succeeds, without holding up
//!   the other tasks;
//! - the due tasks of one service run one at a time, in the order they were added (they walk
//!   the same disks), and the snapshot and quota services are two such services.
//!
//! The clock is injected: the service reads the time only from its [`Clock`] and sleeps with
//! tokio's timers, so a test drives it through a day in milliseconds with tokio's paused time.

use crate::clock::Clock;
use crate::schedule::Schedule;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A failed scheduled run is tried again after this long (an admin's `check` may hold the
/// snapshot repository at 03:00), until it succeeds.
pub const RETRY_AFTER: Duration = Duration::from_secs(5 * 60);

/// The longest the service sleeps before looking at the clock again (the clock may jump).
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What one run of a task returns: a summary to log, or why it failed.
pub type TaskRun = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// One scheduled task.
pub struct Task {
    /// Its name, in logs and in the state file.
    pub name: String,
    /// When it runs.
    pub schedule: Schedule,
    /// Runs it once.
    pub run: Box<dyn Fn() -> TaskRun + Send + Sync>,
}

/// A group of tasks that run one at a time, with their last runs kept in `state_file`.
pub struct Timers {
    /// What the service is called in logs (`snapshots`, `quotas`).
    pub name: &'static str,
    /// Where the last runs are kept; a file holding one time applies to every task.
    pub state_file: PathBuf,
    /// The tasks, in the order they run when due together.
    pub tasks: Vec<Task>,
    /// Where the time comes from.
    pub clock: Arc<dyn Clock>,
}

impl Timers {
    /// Runs the tasks until `stop` turns true.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        if self.tasks.is_empty() {
            return;
        }
        let started = self.clock.now_utc();
        let mut last = self.read_state();
        for t in &self.tasks {
            last.entry(t.name.clone()).or_insert(started);
        }
        let mut retry_at: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
        let mut failed: BTreeMap<String, Failure> = BTreeMap::new();
        loop {
            let now = self.clock.now_utc();
            for i in due_now(&self.tasks, &last, &retry_at, now) {
                let task = &self.tasks[i];
                match (task.run)().await {
                    Ok(summary) => {
                        tracing::info!(timer = self.name, task = %task.name, "{summary}");
                        last.insert(task.name.clone(), now);
                        retry_at.remove(&task.name);
                        failed.remove(&task.name);
                    }
                    Err(why) => {
                        tracing::error!(
                            timer = self.name,
                            task = %task.name,
                            "scheduled run failed: {why}; trying again in {}",
                            labpool_units::format_duration(RETRY_AFTER)
                        );
                        retry_at.insert(task.name.clone(), now + RETRY_AFTER);
                        failed.insert(task.name.clone(), Failure { at: now, why });
                    }
                }
            }
            self.write_state(&last);
            self.write_failures(&failed);
            let sleep = next_wake(&self.tasks, &retry_at, self.clock.now_utc());
            tokio::select! {
                _ = tokio::time::sleep(sleep + Duration::from_millis(50)) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    fn read_state(&self) -> BTreeMap<String, DateTime<Utc>> {
        let Ok(text) = std::fs::read_to_string(&self.state_file) else {
            return BTreeMap::new();
        };
        if let Ok(all) = serde_json::from_str::<DateTime<Utc>>(&text) {
            return self.tasks.iter().map(|t| (t.name.clone(), all)).collect();
        }
        serde_json::from_str(&text).unwrap_or_default()
    }

    /// Failing tasks go to `NAME.failures.json` beside the state file (the monitor's
    /// `snapshot_failed` alert reads it); a success removes its task's entry.
    fn write_failures(&self, failed: &BTreeMap<String, Failure>) {
        let path = failures_file(&self.state_file);
        let text = serde_json::to_string(failed).expect("failures serialise");
        if let Err(e) = crate::atomic_file::write_atomic(&path, text.as_bytes(), 0o644, false) {
            tracing::warn!(timer = self.name, "cannot write {}: {e}", path.display());
        }
    }

    fn write_state(&self, last: &BTreeMap<String, DateTime<Utc>>) {
        let text = serde_json::to_string(last).expect("times serialise");
        // Whole or not at all: a torn file would read as no runs at all.
        if let Err(e) =
            crate::atomic_file::write_atomic(&self.state_file, text.as_bytes(), 0o644, false)
        {
            tracing::warn!(
                timer = self.name,
                "cannot record the last runs in {}: {e}; a restart may run a task again",
                self.state_file.display()
            );
        }
    }
}

/// A task's last failed run, until it succeeds again.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// When it failed.
    pub at: DateTime<Utc>,
    /// Why.
    pub why: String,
}

/// Where a timer service's failing tasks are kept: `snapshot-timer.failures.json` beside
/// `snapshot-timer.json`.
pub fn failures_file(state_file: &std::path::Path) -> PathBuf {
    state_file.with_extension("failures.json")
}

/// A timer service's last successful runs and its failing tasks, as its state files hold them.
pub fn read_runs(
    state_file: &std::path::Path,
) -> (BTreeMap<String, DateTime<Utc>>, BTreeMap<String, Failure>) {
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    (
        serde_json::from_str(&read(state_file)).unwrap_or_default(),
        serde_json::from_str(&read(&failures_file(state_file))).unwrap_or_default(),
    )
}

/// Which tasks run now: due since their last run, and not waiting to retry a failure.
fn due_now(
    tasks: &[Task],
    last: &BTreeMap<String, DateTime<Utc>>,
    retry_at: &BTreeMap<String, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<usize> {
    (0..tasks.len())
        .filter(|&i| {
            let t = &tasks[i];
            let since = last.get(&t.name).copied().unwrap_or(now);
            t.schedule.due(since, now).is_some()
                && retry_at.get(&t.name).is_none_or(|at| now >= *at)
        })
        .collect()
}

/// How long to sleep: until the next fire time or retry, at most [`MAX_SLEEP`].
fn next_wake(
    tasks: &[Task],
    retry_at: &BTreeMap<String, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Duration {
    tasks
        .iter()
        .filter_map(|t| t.schedule.next(now))
        .chain(retry_at.values().copied())
        .min()
        .map_or(MAX_SLEEP, |t| (t - now).to_std().unwrap_or_default())
        .min(MAX_SLEEP)
}

#[cfg(test)]
mod tests;
