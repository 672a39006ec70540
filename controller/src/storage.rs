//! A full state file system. The controller stays up: the engine stops taking work, every
//! request that would change something is answered with what is full and how to free it, and
//! once a write goes through again the engine reloads its state from the database (as after a
//! restart) and takes work again by itself. Nothing is acted on that is not on disk, so the
//! batch that failed is simply not there: its callers got an error, its agents resend.

use crate::db::Db;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a full state file system is tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(5);

/// Free space below which the state file system counts as still full.
const ROOM: u64 = 1 << 20;

/// Why the controller takes no work now, shared by the engine and the API handlers.
#[derive(Debug, Clone, Default)]
pub struct StorageGate(Arc<Mutex<Option<String>>>);

impl StorageGate {
    /// The reason new work is refused, while it is.
    pub fn refused(&self) -> Option<String> {
        self.0.lock().expect("not poisoned").clone()
    }

    /// Starts or stops refusing new work.
    pub fn set(&self, why: Option<String>) {
        *self.0.lock().expect("not poisoned") = why;
    }
}

/// True when `e` (or what caused it) says the disk or the database is full.
pub fn is_full(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return matches!(
                io.raw_os_error(),
                Some(code) if code == nix::libc::ENOSPC || code == nix::libc::EDQUOT
            );
        }
        if let Some(sqlx::Error::Database(db)) = cause.downcast_ref::<sqlx::Error>() {
            // SQLITE_FULL, with or without its extended bits.
            return db
                .code()
                .and_then(|c| c.parse::<i32>().ok())
                .map(|c| c & 0xff)
                == Some(13);
        }
        cause.to_string().contains("database or disk is full")
    })
}

/// What is full, in words: the file system holding `state_dir`, with its free space.
pub fn describe(state_dir: &Path, e: &anyhow::Error) -> String {
    let space = match nix::sys::statvfs::statvfs(state_dir) {
        Ok(s) => format!(
            " ({} free of {})",
            labpool_units::format_size(s.blocks_available() * s.fragment_size()),
            labpool_units::format_size(s.blocks() * s.fragment_size())
        ),
        Err(_) => String::new(),
    };
    let cause = e.root_cause().to_string();
    format!(
        "the file system holding the state directory {} is full{space}: {cause}. labpool takes no new work until there is room; free space there (`df -h {}`), and it goes on by itself",
        state_dir.display(),
        state_dir.display()
    )
}

/// True when a write to the database goes through again and there is some room beyond it.
pub async fn has_room(db: &Db, state_dir: &Path) -> bool {
    // Root may write into the blocks ext4 reserves for it: what counts is what this process
    // may use.
    let root = nix::unistd::geteuid().is_root();
    let free = nix::sys::statvfs::statvfs(state_dir)
        .map(|s| {
            let blocks = if root {
                s.blocks_free()
            } else {
                s.blocks_available()
            };
            blocks * s.fragment_size()
        })
        .unwrap_or(0);
    free >= ROOM && db.probe_write().await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_told_apart_from_other_failures() {
        let enospc = anyhow::Error::new(std::io::Error::from_raw_os_error(nix::libc::ENOSPC))
            .context("writing the batch");
        assert!(is_full(&enospc));
        let other = anyhow::anyhow!(std::io::Error::from_raw_os_error(nix::libc::EACCES));
        assert!(!is_full(&other));
        assert!(is_full(&anyhow::anyhow!(
            "state database: error returned from database: (code: 13) database or disk is full"
        )));
    }
}
