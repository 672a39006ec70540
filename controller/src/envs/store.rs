//! The build store: where builds and their packed copies live, and removing unused ones.

use crate::envs::EnvService;
use crate::error::ApiError;
use crate::settings::Config;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the packed build of `id` is kept.
pub fn archive_path(config: &Config, id: &str) -> PathBuf {
    config.env_archive_dir().join(format!("{id}.tar.zst"))
}

/// True when `dir` holds a complete build that was sealed (owned by root when labpool runs as
/// root): an unsealed one may still be changed by whoever built it.
pub(super) fn is_sealed(dir: &Path) -> bool {
    labpool_envs::pack::is_complete(dir)
        && (!nix::unistd::geteuid().is_root()
            || std::fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
}

/// Removes a build directory, write bits first (a sealed build has none for others).
pub(super) fn remove_tree(dir: &Path) -> Result<(), ApiError> {
    std::fs::remove_dir_all(dir)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(|e| ApiError::internal(format!("cannot remove {}: {e}", dir.display())))
}

impl EnvService {
    /// Deletes every build that no name and no unfinished job uses (a name that moved, a
    /// removed name whose queued jobs have since ended). Called with the build lock held.
    pub(super) async fn collect_garbage(&self) -> Result<(), ApiError> {
        for id in self.db.env_ids().await? {
            if self.db.env_in_use(&id).await? {
                continue;
            }
            if let Some(row) = self.db.env(&id).await? {
                let _ = remove_tree(Path::new(&row.dir));
                let _ = std::fs::remove_file(&row.archive);
            }
            self.db.remove_env(&id).await?;
            tracing::info!(id, "environment build deleted: nothing uses it any more");
        }
        Ok(())
    }
}
