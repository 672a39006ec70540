//! `labpool state backup`: a consistent copy of the controller's own state, taken while it
//! runs, with the config and the cluster key beside it.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Asks for a backup into `to` (absent: `STATE_DIR/backup`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StateBackupRequest {
    /// The directory to write the backup into (created, mode 0700).
    pub to: Option<PathBuf>,
}

/// What a backup wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateBackup {
    /// The directory.
    pub dir: PathBuf,
    /// Each file written, with its size in bytes.
    pub files: Vec<(String, u64)>,
    /// Jobs the copied database holds (read back from the copy).
    pub jobs: u64,
    /// The snapshot of the backup taken into the snapshot repository (and so onto its off-box
    /// copy), when the backup went to its default place and snapshots are on.
    #[serde(default)]
    pub snapshot: Option<String>,
}
