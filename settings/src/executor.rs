//! `[executor]`: who runs the jobs the pool places. labpool's own agents (the default), or the
//! lab's Slurm, with labpool as the admission gate in front of it (see `controller/src/slurm_gate/`).

use super::rebase;
use super::values::{de_duration, ser_duration};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which executor runs jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// labpool's agents start jobs themselves (one box, or one agent per node).
    #[default]
    Agents,
    /// labpool submits each placed job to Slurm, held and pinned, stages its data through the
    /// node's agent (cache only), then releases it.
    Slurm,
}

/// `[executor]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorConfig {
    /// `"agents"` or `"slurm"`.
    pub kind: ExecutorKind,
    /// The directory with Slurm's `sbatch`, `squeue`, `scontrol`, `scancel` and `sacct`.
    pub slurm_bin: PathBuf,
    /// `SLURM_CONF` for those commands; unset: Slurm's own default.
    pub slurm_conf: Option<PathBuf>,
    /// How often Slurm's queue is read for the state of labpool's jobs and foreign load.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub poll: Duration,
    /// How long a released job may stay pending in Slurm (foreign load took its GPUs) before
    /// labpool takes it back and places it again.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub start_timeout: Duration,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            kind: ExecutorKind::Agents,
            slurm_bin: PathBuf::from("/usr/bin"),
            slurm_conf: None,
            poll: Duration::from_secs(1),
            start_timeout: Duration::from_secs(30),
        }
    }
}

impl ExecutorConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        rebase(base, &mut self.slurm_bin);
        if let Some(p) = self.slurm_conf.as_mut() {
            rebase(base, p);
        }
    }

    /// The poll is between 100 ms and a minute; the start timeout at least two polls.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.poll < Duration::from_millis(100) || self.poll > Duration::from_secs(60) {
            problems.push(format!(
                "[executor] poll {:?}: give 100ms to 60s (1s is the default)",
                self.poll
            ));
        }
        if self.start_timeout < 2 * self.poll {
            problems.push(format!(
                "[executor] start_timeout {:?} is shorter than two polls ({:?}): give at least {:?}",
                self.start_timeout,
                2 * self.poll,
                2 * self.poll
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}
