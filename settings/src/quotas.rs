//! `[quotas]`: home and scratch, their per-user limits and the usage scan.

use super::{check_schedule, rebase};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[quotas]`: the two limited file systems and the usage scan.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct QuotasConfig {
    /// When usage is scanned (crontab syntax) [default: hourly]; `""` turns it off.
    pub scan_schedule: Option<String>,
    /// Threads a scan walks with (more than the cores: a cold walk waits on the disk).
    pub scan_threads: Option<usize>,
    /// `[quotas.home]` [default: `home` beside the datasets root].
    pub home: Option<QuotaFsConfig>,
    /// `[quotas.scratch]` [default: `scratch` beside the datasets root].
    pub scratch: Option<QuotaFsConfig>,
}

/// `[quotas.home]`, `[quotas.scratch]`: a root, where each user's directory is, and the limits
/// for users with none of their own (a limit left out is no limit).
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct QuotaFsConfig {
    /// The file system's root.
    pub root: Option<PathBuf>,
    /// Each user's directory below the root; `{user}` is the login name [default: `{user}`].
    pub layout: Option<String>,
    /// Soft byte limit (`40G`).
    pub soft: Option<String>,
    /// Hard byte limit (`50G`).
    pub hard: Option<String>,
    /// Soft limit on entries.
    pub files_soft: Option<u64>,
    /// Hard limit on entries.
    pub files_hard: Option<u64>,
    /// Time allowed over a soft limit (`7d`).
    pub grace: Option<String>,
}

/// One limited file system, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaFs {
    /// `home` or `scratch`.
    pub name: String,
    /// Its root.
    pub root: PathBuf,
    /// Each user's directory below the root, `{user}` for the name.
    pub layout: String,
    /// Limits for users with none of their own.
    pub default_limit: labpool_quotas::limits::Limit,
}

impl QuotaFs {
    /// A user's directory.
    pub fn user_dir(&self, user: &str) -> PathBuf {
        self.root.join(self.layout.replace("{user}", user))
    }
}

impl QuotasConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        for fs in [self.home.as_mut(), self.scratch.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(p) = fs.root.as_mut() {
                rebase(base, p);
            }
        }
    }

    /// `scan_schedule` parses.
    pub(super) fn check_schedule(&self) -> Result<(), String> {
        check_schedule(
            "[quotas] scan_schedule",
            &self.scan_schedule.clone().unwrap_or_default(),
        )
    }

    /// The limited file systems, `home` then `scratch`, with their default limits; a root
    /// left out is the file system's name under `shared_root`.
    pub(super) fn filesystems(&self, shared_root: &Path) -> Result<Vec<QuotaFs>, String> {
        use labpool_quotas::size::{parse_duration, parse_size};
        let mut out = Vec::new();
        for (name, fs) in [("home", &self.home), ("scratch", &self.scratch)] {
            let fs = fs.clone().unwrap_or_default();
            let at = |key: &str| format!("[quotas.{name}] {key}");
            let size = |key: &str, v: &Option<String>| {
                v.as_deref()
                    .map(parse_size)
                    .transpose()
                    .map(Option::flatten)
                    .map_err(|e| format!("{}: {e}", at(key)))
            };
            let limit = labpool_quotas::limits::Limit {
                soft_bytes: size("soft", &fs.soft)?,
                hard_bytes: size("hard", &fs.hard)?,
                soft_files: fs.files_soft,
                hard_files: fs.files_hard,
                grace_secs: fs
                    .grace
                    .as_deref()
                    .map(parse_duration)
                    .transpose()
                    .map_err(|e| format!("{}: {e}", at("grace")))?
                    .map(|d| d.as_secs()),
            };
            limit
                .validate()
                .map_err(|e| format!("[quotas.{name}]: {e}"))?;
            let layout = fs.layout.unwrap_or_else(|| "{user}".to_string());
            if !layout.contains("{user}") || layout.starts_with('/') || layout.contains("..") {
                return Err(format!(
                    "{} {layout:?}: a relative path holding {{user}}, e.g. \"{{user}}\"",
                    at("layout")
                ));
            }
            out.push(QuotaFs {
                name: name.to_string(),
                root: fs.root.unwrap_or_else(|| shared_root.join(name)),
                layout,
                default_limit: limit,
            });
        }
        Ok(out)
    }
}
