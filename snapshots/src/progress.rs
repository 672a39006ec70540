//! Counters a long operation updates and a progress bar reads from another thread.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of a backup, restore or check.
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries done.
    pub entries: AtomicU64,
    /// Content bytes done (read, reused or written).
    pub bytes: AtomicU64,
    /// Bytes expected in all (0 when unknown).
    pub total_bytes: AtomicU64,
    /// Bytes added to the repository.
    pub added: AtomicU64,
    /// Entries skipped with an error.
    pub errors: AtomicU64,
}

impl Progress {
    /// Adds to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
