//! `[controller]`: the daemon's state, its socket and log, and how it treats agents.

use super::rebase;
use super::values::{de_duration, ser_duration, yes};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[controller]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// Directory of the state database and the controller lock.
    pub state_dir: PathBuf,
    /// Unix socket the CLI talks to.
    pub socket: PathBuf,
    /// Log file of `labpool serve` (or `labpool agent`); logs also go to standard error. Under
    /// systemd with its output in the journal, the journal alone keeps them.
    #[serde(default)]
    pub log_file: Option<PathBuf>,
    /// The log file is rotated past this size: `labpool.log` becomes `labpool.log.1`.
    #[serde(
        default = "default_log_max_size",
        deserialize_with = "super::values::de_size"
    )]
    pub log_max_size: u64,
    /// Rotated log files kept (`.1` … `.N`); the oldest goes.
    #[serde(default = "default_log_keep")]
    pub log_keep: usize,
    /// Members of this Unix group (and root) may act on every job.
    #[serde(default = "default_admin_group")]
    pub admin_group: String,
    /// Time between TERM and KILL when a job is cancelled or reaches its time limit.
    #[serde(
        default = "default_kill_grace",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub kill_grace: Duration,
    /// Address node agents join at, `HOST:PORT` (`labpool init` writes a loopback one; give
    /// the LAN address to take agents from other machines). Absent: one box, no agents.
    #[serde(default)]
    pub listen: Option<String>,
    /// The cluster key file that agents' requests are signed with [default: cluster.key beside
    /// this file].
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// A node whose agent sends no heartbeat for this long goes DOWN and its jobs are requeued.
    #[serde(
        default = "default_node_timeout",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub node_timeout: Duration,
    /// Requests whose signing clock is further than this from ours are refused.
    #[serde(
        default = "default_max_clock_skew",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub max_clock_skew: Duration,
    /// Run this machine's own agent inside the controller (the one-box default). False for a
    /// controller that only schedules for agents on other machines.
    #[serde(default = "yes")]
    pub local_node: bool,
}

impl ControllerConfig {
    /// The log's rotation: at least 64 KiB a file, 1 to 100 files kept.
    pub(super) fn check_log(&self) -> Result<(), String> {
        if self.log_max_size < 64 << 10 || !(1..=100).contains(&self.log_keep) {
            return Err(format!(
                "[controller] log_max_size {} and log_keep {}: give at least 64K and 1 to 100 files (the defaults are 64M and 4)",
                labpool_units::format_size(self.log_max_size),
                self.log_keep
            ));
        }
        Ok(())
    }

    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        rebase(base, &mut self.state_dir);
        rebase(base, &mut self.socket);
        if let Some(p) = self.key.as_mut() {
            rebase(base, p);
        }
        if let Some(p) = self.log_file.as_mut() {
            rebase(base, p);
        }
    }
}

fn default_log_max_size() -> u64 {
    64 << 20
}

fn default_log_keep() -> usize {
    4
}

fn default_admin_group() -> String {
    "labpool-admins".to_string()
}

fn default_kill_grace() -> Duration {
    Duration::from_secs(30)
}

fn default_node_timeout() -> Duration {
    Duration::from_secs(300)
}

fn default_max_clock_skew() -> Duration {
    Duration::from_secs(300)
}
