//! `[envs]`: where software environments are built and kept.

use super::rebase;
use super::values::{de_duration, ser_duration};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[envs]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvsConfig {
    /// Where builds live, at the same path on every node, because Python environments are not
    /// relocatable [default: STATE_DIR/envs].
    pub store: Option<PathBuf>,
    /// Where packed builds (tar + zstd) are kept for nodes to stage from; shared storage in a
    /// pool of several nodes [default: STATE_DIR/env-archives].
    pub archive: Option<PathBuf>,
    /// The Python that venvs are built with [default: /usr/bin/python3, else python3 on PATH].
    pub python: Option<PathBuf>,
    /// Most time one build may take, e.g. "30m".
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub build_timeout: Duration,
    /// The unprivileged user venv, conda and modules builds run as [default: nobody].
    #[serde(default = "default_build_user")]
    pub build_user: String,
}

fn default_build_user() -> String {
    "nobody".to_string()
}

impl Default for EnvsConfig {
    fn default() -> Self {
        EnvsConfig {
            store: None,
            archive: None,
            python: None,
            build_timeout: Duration::from_secs(30 * 60),
            build_user: default_build_user(),
        }
    }
}

impl EnvsConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        for p in [
            self.store.as_mut(),
            self.archive.as_mut(),
            self.python.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            rebase(base, p);
        }
    }
}
