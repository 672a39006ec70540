//! API bodies for datasets (`/v1/datasets…`) and node caches (`/v1/cache…`), shared by the
//! server and the client. Sizes are bytes; times are RFC 3339.

use labpool_cache::store::Progress;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The first 12 characters of a version: enough to tell versions apart when reading.
pub fn short(version: &str) -> &str {
    &version[..version.len().min(12)]
}

/// `POST /v1/datasets`: register a directory under the datasets root (admins).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddDatasetRequest {
    /// Name jobs declare it by.
    pub name: String,
    /// Source directory.
    pub path: PathBuf,
    /// What it is.
    #[serde(default)]
    pub description: String,
}

/// A registered dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetView {
    /// Name.
    pub name: String,
    /// Source directory.
    pub path: PathBuf,
    /// What it is.
    pub description: String,
    /// When it was registered.
    pub created: String,
    /// Who registered it.
    pub created_by: String,
    /// The version new jobs get.
    pub current: String,
    /// Files in the current version.
    pub files: u64,
    /// Bytes in the current version.
    pub bytes: u64,
    /// Versions recorded.
    pub versions: u32,
    /// The variable a job reads its local copy's path from.
    pub env_var: String,
}

/// One version of a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetVersionView {
    /// Version (manifest hash).
    pub version: String,
    /// When it was recorded.
    pub created: String,
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
    /// Files added or changed since the version before.
    pub changed_files: u64,
    /// Bytes of those files.
    pub changed_bytes: u64,
    /// True for the version new jobs get.
    pub current: bool,
}

/// `GET /v1/datasets/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetDetail {
    /// The dataset.
    #[serde(flatten)]
    pub dataset: DatasetView,
    /// Its versions, newest first.
    pub history: Vec<DatasetVersionView>,
}

/// `POST /v1/datasets/{name}/rescan`: what changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RescanOutcome {
    /// The dataset after the rescan.
    pub dataset: DatasetView,
    /// True when a new version was recorded.
    pub new_version: bool,
    /// Files added.
    pub added: u64,
    /// Files removed.
    pub removed: u64,
    /// Files changed.
    pub changed: u64,
    /// Bytes of added and changed files.
    pub changed_bytes: u64,
}

/// A version in a node cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedVersionView {
    /// Dataset.
    pub name: String,
    /// Version.
    pub version: String,
    /// Staged completely (jobs may use it).
    pub complete: bool,
    /// True when it is the dataset's current version.
    pub current: bool,
    /// Bytes of its files.
    pub bytes: u64,
    /// Bytes no other version shares (what removing it frees).
    pub unique_bytes: u64,
    /// Files.
    pub files: u64,
    /// Jobs that used it.
    pub uses: u64,
    /// Of those, jobs that found it staged already.
    pub hits: u64,
    /// Last use.
    pub last_use: Option<String>,
    /// Jobs that pin it (running, staging, or predicted to start here).
    pub pinned_by: Vec<u64>,
}

/// A stage in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagingView {
    /// Dataset.
    pub name: String,
    /// Version.
    pub version: String,
    /// For whom: `job N`, `prefetch for job N` or `warm-up`.
    pub purpose: String,
    /// Files and bytes so far.
    pub progress: Progress,
}

/// `GET /v1/cache`: one node's cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheStatus {
    /// Node.
    pub node: String,
    /// Capacity, bytes.
    pub capacity: u64,
    /// Bytes held.
    pub used_bytes: u64,
    /// Versions held, complete or not.
    pub versions: Vec<CachedVersionView>,
    /// Stages in progress.
    pub staging: Vec<StagingView>,
    /// Prefetches and warm-ups sent and not finished, as `NAME@VERSION`.
    pub queued: Vec<String>,
    /// The last prefetch or warm-up of a dataset that failed here, as `NAME@VERSION: why`
    /// (until one succeeds).
    #[serde(default)]
    pub failed: Vec<String>,
}

/// `POST /v1/cache/stage`: warm a node's cache with a dataset's current version (admins).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRequest {
    /// Dataset.
    pub name: String,
    /// Node [default: every node].
    #[serde(default)]
    pub node: Option<String>,
}

/// What a warm-up was told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageQueued {
    /// Dataset.
    pub name: String,
    /// Version being staged.
    pub version: String,
    /// Nodes it was queued on (already complete elsewhere).
    pub nodes: Vec<String>,
}

/// `POST /v1/cache/verify` (admins).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// Node [default: every node].
    #[serde(default)]
    pub node: Option<String>,
}

/// One version's verify.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifiedVersion {
    /// Node.
    pub node: String,
    /// Dataset.
    pub name: String,
    /// Version.
    pub version: String,
    /// Files hashed.
    pub files: u64,
    /// Files whose content did not match the staged manifest.
    pub mismatched: Vec<String>,
    /// Of those, files staged again from the source and now matching.
    pub repaired: Vec<String>,
}

/// `GET /v1/cache` filters.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheQuery {
    /// One node [default: all].
    pub node: Option<String>,
}
