//! `[snapshots]`: nightly deduplicated backups of shared data.

use super::rebase;
use super::values::yes;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[snapshots]`: the backup repository, what is backed up when, and how long it is kept.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnapshotsConfig {
    /// The repository, on the backup disk [default: STATE_DIR/snapshots].
    pub repo: Option<PathBuf>,
    /// Run the scheduled backups in the controller.
    pub enabled: bool,
    /// Retention after each scheduled run: the newest N snapshots...
    pub keep_last: u32,
    /// ...the newest of each of the last N days...
    pub keep_daily: u32,
    /// ...of each of the last N ISO weeks...
    pub keep_weekly: u32,
    /// ...and of each of the last N months.
    pub keep_monthly: u32,
    /// What is backed up [default: `datasets` (the datasets root) and `home` (`home` beside
    /// it), nightly at 03:00].
    #[serde(rename = "source")]
    pub sources: Option<Vec<SnapshotSource>>,
}

impl Default for SnapshotsConfig {
    fn default() -> Self {
        SnapshotsConfig {
            repo: None,
            enabled: true,
            keep_last: 0,
            keep_daily: 7,
            keep_weekly: 4,
            keep_monthly: 6,
            sources: None,
        }
    }
}

impl SnapshotsConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        if let Some(p) = self.repo.as_mut() {
            rebase(base, p);
        }
        if let Some(sources) = self.sources.as_mut() {
            for src in sources.iter_mut() {
                rebase(base, &mut src.path);
            }
        }
    }

    /// The retention policy applied after each scheduled backup.
    pub(super) fn policy(&self) -> labpool_snapshots::Policy {
        labpool_snapshots::Policy {
            keep_last: self.keep_last,
            keep_daily: self.keep_daily,
            keep_weekly: self.keep_weekly,
            keep_monthly: self.keep_monthly,
        }
    }
}

/// `[[snapshots.source]]`: one directory tree backed up on a schedule.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSource {
    /// Its name in `snapshot list` and `create --source`.
    pub name: String,
    /// The directory.
    pub path: PathBuf,
    /// When, in crontab syntax (`0 3 * * *`); a sixth leading field gives seconds.
    #[serde(default = "default_snapshot_schedule")]
    pub schedule: String,
    /// Glob patterns to leave out (`*.tmp`, `**/__pycache__`).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Stay on the source's file system (mount points are kept empty).
    #[serde(default = "yes")]
    pub one_file_system: bool,
}

/// When a source is backed up if it does not say: nightly at 03:00.
pub(super) fn default_snapshot_schedule() -> String {
    "0 3 * * *".to_string()
}

/// Source names are unique words, schedules parse, and paths are absolute.
pub(super) fn check_sources(sources: &[SnapshotSource]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for s in sources {
        if s.name.is_empty()
            || s.name == "path"
            || !s
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "[[snapshots.source]] name {:?}: use letters, digits, '-' and '_' (and not \"path\", which marks ad-hoc snapshots)",
                s.name
            ));
        }
        if !seen.insert(&s.name) {
            return Err(format!(
                "[[snapshots.source]] name {:?} is given twice",
                s.name
            ));
        }
        crate::schedule::Schedule::parse(&s.schedule)
            .map_err(|e| format!("[[snapshots.source]] {}: {e}", s.name))?;
    }
    Ok(())
}
