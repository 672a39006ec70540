//! `[agent]`: this node joins a controller elsewhere (`labpool agent`).

use super::rebase;
use super::values::{de_duration, ser_duration};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[agent]`: present in the config of a node that joins a controller (`labpool agent`). In
/// such a config `[controller] state_dir` and `socket` are the agent's own: its job spool and
/// the socket this node's CLI talks to (the agent forwards to the controller).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The controller's `listen` address, `HOST:PORT`.
    pub join: String,
    /// The cluster key file, a copy of the controller's (mode 0600).
    pub key: PathBuf,
    /// Where this agent takes orders and peers' stage requests, `HOST:PORT` (port 0: any).
    #[serde(default = "default_agent_listen")]
    pub listen: String,
    /// The address others reach this agent at [default: `listen` when it names one address;
    /// when it listens on all (`0.0.0.0`), the host the controller sees the agent's connections
    /// come from, with the listening port].
    #[serde(default)]
    pub advertise: Option<String>,
    /// Time between heartbeats.
    #[serde(
        default = "default_heartbeat",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub heartbeat: Duration,
    /// Where this node keeps a copy of the controller's snapshot repository (`labpool snapshot
    /// copy --to node:NAME`); without it the node takes none.
    #[serde(default)]
    pub snapshot_copy: Option<PathBuf>,
}

impl AgentConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        rebase(base, &mut self.key);
        if let Some(p) = &mut self.snapshot_copy {
            rebase(base, p);
        }
    }
}

fn default_heartbeat() -> Duration {
    Duration::from_secs(10)
}

fn default_agent_listen() -> String {
    "0.0.0.0:7071".to_string()
}
