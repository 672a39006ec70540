//! Snapshot records: one per backup, naming its root tree and saying where and when it was taken.

use crate::blob::BlobId;
use crate::tree::Node;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One snapshot of one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// 16 hex digits; any unique prefix names it.
    pub id: String,
    /// When the backup started.
    pub time: DateTime<Utc>,
    /// The configured source name (`datasets`, `home`…), or `path` for an ad-hoc backup.
    pub source: String,
    /// The directory that was backed up; paths in the snapshot are relative to it.
    pub path: PathBuf,
    /// The host it was taken on.
    pub host: String,
    /// The snapshot whose unchanged files were reused.
    pub parent: Option<String>,
    /// The root directory's tree.
    pub tree: BlobId,
    /// The backed-up directory itself (name, owner, mode, times); its subtree is `tree`.
    pub root: Node,
    /// Regular files.
    pub files: u64,
    /// Directories.
    pub dirs: u64,
    /// Bytes of file content.
    pub bytes: u64,
    /// Bytes this snapshot added to the repository (after dedup and compression).
    pub added_bytes: u64,
    /// Entries that could not be read (skipped, with a warning).
    pub errors: u64,
}

impl Snapshot {
    /// The short id shown in listings.
    pub fn short_id(&self) -> &str {
        &self.id[..8.min(self.id.len())]
    }
}
