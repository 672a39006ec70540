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
    /// Where the repository is copied after each scheduled backup, off this box: a directory
    /// (`/mnt/offsite/labpool`), another node's copy (`node:NAME`, its `[agent] snapshot_copy`),
    /// or a bucket (`s3://BUCKET/PREFIX`, with `[snapshots.s3]`). None: no copy.
    pub copy_to: Option<String>,
    /// When the copy is brought up to date (crontab; it sends only what is new).
    pub copy_schedule: String,
    /// A webhook alert fires when the newest snapshot has not reached the copy for this long.
    #[serde(
        deserialize_with = "super::values::de_duration",
        serialize_with = "super::values::ser_duration"
    )]
    pub copy_max_lag: std::time::Duration,
    /// The object store for an `s3://` copy.
    pub s3: Option<S3Config>,
}

/// `[snapshots.s3]`: an S3-compatible object store (AWS, MinIO, Ceph RGW…).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct S3Config {
    /// `https://s3.eu-west-1.amazonaws.com`, `http://10.0.0.5:9000`.
    pub endpoint: String,
    /// The region the requests are signed for.
    #[serde(default = "default_region")]
    pub region: String,
    /// The access key id.
    pub access_key_id: String,
    /// A file holding the secret access key (mode 0600), read at each copy.
    pub secret_access_key_file: PathBuf,
}

fn default_region() -> String {
    "us-east-1".to_string()
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
            copy_to: None,
            copy_schedule: "*/10 * * * *".to_string(),
            copy_max_lag: std::time::Duration::from_secs(36 * 3600),
            s3: None,
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
        if let Some(s3) = self.s3.as_mut() {
            rebase(base, &mut s3.secret_access_key_file);
        }
    }

    /// A copy target that parses, and an `s3://` one has `[snapshots.s3]`.
    pub(super) fn check_copy(&self) -> Result<(), String> {
        let Some(text) = &self.copy_to else {
            return Ok(());
        };
        let target = crate::copy_target::CopyTarget::parse(text)
            .map_err(|e| format!("[snapshots] copy_to: {e}"))?;
        crate::schedule::Schedule::parse(&self.copy_schedule)
            .map_err(|e| format!("[snapshots] copy_schedule: {e}"))?;
        if matches!(target, crate::copy_target::CopyTarget::S3 { .. }) && self.s3.is_none() {
            return Err(format!(
                "[snapshots] copy_to = {text:?} needs [snapshots.s3] with endpoint, access_key_id and secret_access_key_file"
            ));
        }
        Ok(())
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
pub fn default_snapshot_schedule() -> String {
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
