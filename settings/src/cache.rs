//! `[cache]`: the node-local copy of datasets that jobs read.

use super::rebase;
use super::values::{de_duration, de_opt_rate, de_opt_size, ser_duration};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[cache]`: the node-local copy of datasets that jobs read.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Cache root on the node's local disk [default: STATE_DIR/cache].
    pub dir: Option<PathBuf>,
    /// Most bytes the cache may hold, e.g. "500G" [default: 90% of its file system].
    #[serde(deserialize_with = "de_opt_size")]
    pub capacity: Option<u64>,
    /// Above this share of capacity, unpinned versions are removed after a stage...
    pub high_watermark: f64,
    /// ...until the cache is down to this share.
    pub low_watermark: f64,
    /// Files copied at once while staging; fewer spare the file server.
    pub workers: usize,
    /// Most bytes per second staging reads, e.g. "200M" [default: no limit].
    #[serde(deserialize_with = "de_opt_rate")]
    pub bandwidth: Option<u64>,
    /// How far ahead a queued job's data is staged on the node it is predicted to start on
    /// ("0s" switches prefetch off).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub prefetch_horizon: Duration,
    /// Longest a job waits for a node that holds its data rather than copy it to a free node,
    /// when the wait is expected to be shorter than the copy ("0s" never waits).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub locality_wait: Duration,
    /// Longest a job that could start now on a node without its data waits, its GPUs not
    /// taken, while the data is copied there (a stage-in); past it the job takes its GPUs and
    /// waits for the rest on them ("0s" takes them at once).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub stage_in_wait: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            dir: None,
            capacity: None,
            high_watermark: 0.9,
            low_watermark: 0.8,
            workers: 4,
            bandwidth: None,
            prefetch_horizon: Duration::from_secs(30 * 60),
            locality_wait: Duration::from_secs(30 * 60),
            stage_in_wait: Duration::from_secs(7 * 86_400),
        }
    }
}

impl CacheConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        if let Some(p) = self.dir.as_mut() {
            rebase(base, p);
        }
    }

    /// 0 < `low_watermark` <= `high_watermark` <= 1.
    pub(super) fn check_watermarks(&self) -> Result<(), String> {
        if !(0.0 < self.low_watermark
            && self.low_watermark <= self.high_watermark
            && self.high_watermark <= 1.0)
        {
            return Err(format!(
                "[cache]: watermarks must satisfy 0 < low_watermark ({}) <= high_watermark ({}) <= 1",
                self.low_watermark, self.high_watermark
            ));
        }
        Ok(())
    }
}
