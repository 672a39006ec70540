//! Counters a long scan or purge updates and a progress bar reads from another thread.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters.
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries looked at.
    pub entries: AtomicU64,
    /// Bytes counted (allocated) or removed.
    pub bytes: AtomicU64,
    /// Entries removed (purge).
    pub removed: AtomicU64,
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
