//! A node's dataset cache: the handle, and the names the rest of labpool imports from here.
//!
//! Versions live apart (see [`crate::layout`]), so a running job never sees its files change.
//! A file is copied to `.partial`, hashed on the way, synced and renamed; a file unchanged since
//! an older staged version is hard-linked from it instead, and one a peer node holds may come
//! from it (see [`crate::peer`]). A crash mid-stage leaves a version without its marker;
//! staging it again picks up from the journal. The work is split by concept:
//! [`crate::stage`], [`crate::inventory`], [`crate::verify`] and [`crate::evict`].

use crate::error::CacheError;
use crate::layout::REMOVING;
use crate::staged::Parsed;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::evict::{eviction_order, plan};
pub use crate::inventory::{CachedVersion, Inventory};
pub use crate::stage::{Progress, StageOptions, StageReport, bytes_to_stage};
pub use crate::verify::VerifyReport;

/// A node's dataset cache.
#[derive(Debug, Clone)]
pub struct NodeCache {
    root: PathBuf,
    /// Staged manifests parsed or written lately, shared by the handle's clones.
    pub(crate) parsed: Arc<Parsed>,
}

impl NodeCache {
    /// The cache at `root`, created if missing (readable by all, writable by its owner only).
    pub fn open(root: &Path) -> Result<NodeCache, CacheError> {
        std::fs::create_dir_all(root).map_err(|e| CacheError::io(root, e))?;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| CacheError::io(root, e))?;
        // Versions whose removal a crash interrupted: they were invisible already.
        for name in std::fs::read_dir(root)
            .map_err(|e| CacheError::io(root, e))?
            .flatten()
        {
            for entry in std::fs::read_dir(name.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if entry.file_name().to_string_lossy().starts_with(REMOVING) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        Ok(NodeCache {
            root: root.to_path_buf(),
            parsed: Arc::default(),
        })
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
