//! What the CLI and the controller say about software environments.

use labpool_envs::{EnvKind, Lock};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `POST /v1/envs`: build (or reuse) an environment and point a name at it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateEnv {
    /// The name.
    pub name: String,
    /// Publish it for everyone (admins only).
    #[serde(default)]
    pub shared: bool,
    /// The lock, made by the CLI as the user.
    pub lock: Lock,
}

/// `POST /v1/envs/rm`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoveEnv {
    /// The name.
    pub name: String,
    /// The shared name (admins only), not the caller's own.
    #[serde(default)]
    pub shared: bool,
}

/// `GET /v1/envs` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EnvQuery {
    /// Every user's names (admins only).
    #[serde(default)]
    pub all: bool,
}

/// An environment name and the build it points at.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnvView {
    /// The name.
    pub name: String,
    /// Whose name it is; empty for a shared one.
    pub owner: String,
    /// The build's id.
    pub id: String,
    /// Its kind.
    pub kind: EnvKind,
    /// Its platform.
    pub platform: String,
    /// Where it lives on every node.
    pub dir: PathBuf,
    /// The packed build.
    pub archive: PathBuf,
    /// Bytes on disk.
    pub bytes: u64,
    /// Bytes packed.
    pub archive_bytes: u64,
    /// When it was built (RFC 3339).
    pub built: String,
    /// Who built it.
    pub built_by: String,
    /// Seconds the build took.
    pub build_s: f64,
    /// The build's log.
    pub build_log: PathBuf,
    /// The lock text.
    pub lock: String,
    /// The spec as given.
    pub spec: String,
    /// Every name pointing at this build, `owner/name` (`name` for shared ones).
    pub names: Vec<String>,
}

/// What `POST /v1/envs` did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnvCreated {
    /// The environment.
    pub env: EnvView,
    /// True when an existing build with the same id was reused (nothing was built).
    pub reused: bool,
    /// The name pointed at another build before.
    pub moved_from: Option<String>,
}

/// What `POST /v1/envs/rm` did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EnvRemoved {
    /// The name removed.
    pub name: String,
    /// The build it pointed at.
    pub id: String,
    /// True when the build itself was deleted (no other name or queued job used it).
    pub build_deleted: bool,
}
