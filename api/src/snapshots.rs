//! API bodies for snapshots (`/v1/snapshots…`), shared by the server and the client. What a
//! member may see is decided by the server from the caller's uid, never from these bodies.

use chrono::{DateTime, Utc};
use labpool_snapshots::Snapshot;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use labpool_snapshots::browse::{Change, Entry, FindReport, Sighting};
pub use labpool_snapshots::restore::RestoreReport;

/// One snapshot, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotView {
    /// Id (16 hex digits; 8 are shown and enough).
    pub id: String,
    /// When it was taken.
    pub time: DateTime<Utc>,
    /// Source name, or `path` for an ad-hoc snapshot.
    pub source: String,
    /// The directory backed up.
    pub path: PathBuf,
    /// Host.
    pub host: String,
    /// The snapshot it reused unchanged files from.
    pub parent: Option<String>,
    /// Files.
    pub files: u64,
    /// Directories.
    pub dirs: u64,
    /// Bytes of file content.
    pub bytes: u64,
    /// Bytes it added to the repository.
    pub added_bytes: u64,
    /// Entries that could not be read.
    pub errors: u64,
}

impl From<&Snapshot> for SnapshotView {
    fn from(s: &Snapshot) -> Self {
        SnapshotView {
            id: s.id.clone(),
            time: s.time,
            source: s.source.clone(),
            path: s.path.clone(),
            host: s.host.clone(),
            parent: s.parent.clone(),
            files: s.files,
            dirs: s.dirs,
            bytes: s.bytes,
            added_bytes: s.added_bytes,
            errors: s.errors,
        }
    }
}

/// `GET /v1/snapshots?source=NAME`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListQuery {
    /// Only this source.
    pub source: Option<String>,
}

/// `POST /v1/snapshots/ls`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LsRequest {
    /// Snapshot id or prefix, or `latest`.
    pub snapshot: String,
    /// Absolute path inside it [default: its root].
    pub path: Option<PathBuf>,
    /// All levels below.
    #[serde(default)]
    pub recursive: bool,
}

/// `POST /v1/snapshots/find`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindRequest {
    /// Absolute path.
    pub path: PathBuf,
}

/// `POST /v1/snapshots/diff`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffRequest {
    /// The older snapshot.
    pub a: String,
    /// The newer snapshot.
    pub b: String,
}

/// `POST /v1/snapshots/restore`: starts a restore; poll its id for progress.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// Absolute path of the file or directory as it was.
    pub path: PathBuf,
    /// `latest` (default), `yesterday`, `today`, a date, a time, or a snapshot id.
    pub at: Option<String>,
    /// Restore into this existing directory instead of the original place.
    pub target: Option<PathBuf>,
    /// Replace what exists.
    #[serde(default)]
    pub overwrite: bool,
}

/// A restore that started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoreStarted {
    /// Poll `GET /v1/snapshots/restores/{id}`.
    pub id: u64,
    /// The snapshot it reads.
    pub snapshot: SnapshotView,
    /// Bytes it will write.
    pub total_bytes: u64,
}

/// `GET /v1/snapshots/restores/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoreStatus {
    /// Bytes written so far.
    pub bytes: u64,
    /// Bytes in all.
    pub total_bytes: u64,
    /// Entries done.
    pub entries: u64,
    /// The outcome, once finished.
    pub report: Option<RestoreReport>,
    /// Why it failed, once failed.
    pub error: Option<String>,
}
