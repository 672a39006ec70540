//! `[datasets]`: the shared storage that datasets are registered from.

use super::{check_schedule, rebase};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[datasets]`: the shared storage that datasets are registered from.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatasetsConfig {
    /// Only directories under this root may be registered.
    pub root: PathBuf,
    /// Threads that walk a source when it is registered or rescanned.
    pub scan_threads: usize,
    /// When the read-only audit runs (crontab syntax); `""` turns it off.
    pub audit_schedule: String,
    /// Where the lab model cache keeps models in the Hugging Face hub's layout, one dataset
    /// each [default: ROOT/.models].
    pub models: Option<PathBuf>,
}

impl Default for DatasetsConfig {
    fn default() -> Self {
        DatasetsConfig {
            root: PathBuf::from("/shared/datasets"),
            scan_threads: 8,
            audit_schedule: "0 5 * * *".to_string(),
            models: None,
        }
    }
}

impl DatasetsConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        rebase(base, &mut self.root);
        if let Some(m) = self.models.as_mut() {
            rebase(base, m);
        }
    }

    /// Where models are kept.
    pub fn models_store(&self) -> PathBuf {
        self.models
            .clone()
            .unwrap_or_else(|| self.root.join(".models"))
    }

    /// `audit_schedule` parses.
    pub(super) fn check_schedule(&self) -> Result<(), String> {
        check_schedule("[datasets] audit_schedule", &self.audit_schedule)
    }
}
