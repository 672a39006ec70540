//! One copy of the repository to its target, shared by `labpool snapshot copy` and the
//! controller's timer, with the status both leave in `STATE_DIR/snapshot-copy.json` and the
//! alert when the copy falls behind.

use super::CopyTarget;
use crate::settings::Config;
use anyhow::Context;
use chrono::{DateTime, Utc};
use labpool_snapshots::copy::{CopyReport, DirStore, copy};
use labpool_snapshots::{LockMode, Progress, Repository};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;
use tokio::runtime::Handle;

/// The last copy, as the state directory records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CopyStatus {
    /// The target it went to.
    pub target: String,
    /// When the last copy that went through ended.
    pub last_ok: Option<DateTime<Utc>>,
    /// The newest snapshot the copy holds, as of `last_ok`.
    pub newest_copied: Option<DateTime<Utc>>,
    /// When the last try ended, and why it failed, if it did.
    pub last_try: Option<DateTime<Utc>>,
    /// Why the last try failed.
    pub error: Option<String>,
    /// What the last copy that went through did.
    pub report: Option<CopyReport>,
}

fn status_file(config: &Config) -> PathBuf {
    config.controller.state_dir.join("snapshot-copy.json")
}

/// The status the last copy left.
pub fn read_status(config: &Config) -> Option<CopyStatus> {
    let text = std::fs::read_to_string(status_file(config)).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_status(config: &Config, status: &CopyStatus) {
    let bytes = serde_json::to_vec_pretty(status).expect("a status serialises");
    if let Err(e) = crate::atomic_file::write_atomic(&status_file(config), &bytes, 0o600, false) {
        tracing::warn!("cannot record the copy's status: {e}");
    }
}

/// The copy target `to` names, else `[snapshots] copy_to`: as written, and parsed.
pub fn resolve_target(config: &Config, to: Option<&str>) -> anyhow::Result<(String, CopyTarget)> {
    let text = to
        .map(str::to_string)
        .or_else(|| config.snapshots.copy_to.clone())
        .with_context(|| {
            format!(
                "no copy target\nhint: give --to DIR, --to node:NAME or --to s3://BUCKET/PREFIX, or set copy_to under [snapshots] in {}",
                config.path.display()
            )
        })?;
    let target = CopyTarget::parse(&text).map_err(anyhow::Error::msg)?;
    Ok((text, target))
}

/// Copies the repository of `config` to `target` (default `[snapshots] copy_to`), holding the
/// repository's read lock so a prune cannot remove a pack under the copy. A node is reached at
/// `node_address`. Blocking: run it off the async threads. The status is recorded either way.
pub fn run_copy(
    config: &Config,
    target: Option<&str>,
    node_address: Option<String>,
    mirror: bool,
    progress: &Progress,
    runtime: Handle,
) -> anyhow::Result<(CopyTarget, CopyReport)> {
    let (text, target) = resolve_target(config, target)?;
    let repo_path = config.snapshot_repo();
    let mut status = read_status(config)
        .filter(|s| s.target == text)
        .unwrap_or(CopyStatus {
            target: text.clone(),
            ..CopyStatus::default()
        });
    let result = (|| -> anyhow::Result<(CopyReport, Option<DateTime<Utc>>)> {
        let repo = Repository::open(&repo_path)
            .with_context(|| format!("the snapshot repository {}", repo_path.display()))?;
        let _lock = repo.lock(LockMode::Read)?;
        let newest = repo.snapshots()?.iter().map(|s| s.time).max();
        let store = super::open(&target, config, node_address, runtime)?;
        let report = copy(&DirStore::new(&repo_path), store.as_ref(), mirror, progress)
            .with_context(|| format!("copying {} to {text}", repo_path.display()))?;
        Ok((report, newest))
    })();
    let now = Utc::now();
    status.last_try = Some(now);
    match result {
        Ok((report, newest)) => {
            status.last_ok = Some(now);
            status.newest_copied = newest;
            status.error = None;
            status.report = Some(report.clone());
            write_status(config, &status);
            Ok((target, report))
        }
        Err(e) => {
            status.error = Some(format!("{e:#}"));
            write_status(config, &status);
            Err(e)
        }
    }
}

/// The alert to post when the copy is behind: the repository's newest snapshot (`newest`) is
/// older than `max_lag` and the copy does not hold it. `None` when the copy is current.
pub fn lag_alert(
    status: &CopyStatus,
    newest: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    max_lag: Duration,
) -> Option<serde_json::Value> {
    let newest = newest?;
    if status.newest_copied.is_some_and(|c| c >= newest) {
        return None;
    }
    let behind = (now - newest).to_std().unwrap_or_default();
    if behind < max_lag {
        return None;
    }
    let text = format!(
        "the snapshot copy to {} is behind: the newest snapshot ({}) is not in it after {}; last copy that went through: {}; last error: {}",
        status.target,
        crate::clock::when(newest.timestamp_millis()),
        labpool_units::format_duration_approx(behind),
        status
            .last_ok
            .map_or("never".to_string(), |t| crate::clock::when(
                t.timestamp_millis()
            )),
        status.error.as_deref().unwrap_or("none")
    );
    Some(serde_json::json!({
        "kind": "snapshot_copy_behind",
        "target": status.target,
        "newest_snapshot": newest,
        "last_copy": status.last_ok,
        "error": status.error,
        "text": text,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alert_fires_only_when_the_newest_snapshot_is_missing_for_too_long() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let lag = Duration::from_secs(36 * 3600);
        let mut status = CopyStatus {
            target: "s3://b/p".into(),
            newest_copied: Some(t("2026-12-01T03:00:00Z")),
            last_ok: Some(t("2026-12-01T03:05:00Z")),
            error: Some("HTTP 403".into()),
            ..CopyStatus::default()
        };
        let newest = Some(t("2026-12-02T03:00:00Z"));
        assert!(lag_alert(&status, newest, t("2026-12-02T12:00:00Z"), lag).is_none());
        let alert = lag_alert(&status, newest, t("2026-12-03T16:00:00Z"), lag).unwrap();
        assert_eq!(alert["kind"], "snapshot_copy_behind");
        assert!(alert["text"].as_str().unwrap().contains("HTTP 403"));
        status.newest_copied = newest;
        assert!(lag_alert(&status, newest, t("2026-12-09T00:00:00Z"), lag).is_none());
    }
}
