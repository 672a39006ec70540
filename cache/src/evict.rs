//! Pinning and eviction: which versions go to make room, and removing them.
//!
//! A pinned version (one a running or coming job reads) never goes. The decision is a pure
//! function of a listing, so the controller can make it from its own view of a node.

use crate::error::CacheError;
use crate::inventory::CachedVersion;
use crate::layout::{COMPLETE, JOURNAL, MANIFEST, STATS};
use crate::store::NodeCache;
use std::collections::{BTreeMap, BTreeSet};

impl NodeCache {
    /// Removes a version: it disappears at once (renamed away), then its files go.
    pub fn remove(&self, name: &str, version: &str) -> Result<(), CacheError> {
        let _ = std::fs::remove_file(self.side(name, version, COMPLETE));
        let dir = self.dir(name, version);
        if dir.exists() {
            let trash = self.trash(name, version);
            std::fs::rename(&dir, &trash).map_err(|e| CacheError::io(&dir, e))?;
            std::fs::remove_dir_all(&trash).map_err(|e| CacheError::io(&trash, e))?;
        }
        for suffix in [MANIFEST, JOURNAL, STATS] {
            let _ = std::fs::remove_file(self.side(name, version, suffix));
        }
        let parent = self.root().join(name);
        if std::fs::read_dir(&parent).is_ok_and(|mut d| d.next().is_none()) {
            let _ = std::fs::remove_dir(&parent);
        }
        Ok(())
    }

    /// Versions to remove so that `needed` more bytes fit within `capacity`: never a pinned one;
    /// first the one whose next use is furthest away (`next_use`: queue position; absent: no
    /// known use), then the largest. Incomplete versions not pinned go first.
    pub fn plan_eviction(
        &self,
        needed: u64,
        capacity: u64,
        pinned: &BTreeSet<(String, String)>,
        next_use: &BTreeMap<(String, String), usize>,
    ) -> Result<Vec<(String, String)>, CacheError> {
        let versions = self.list()?;
        let used = self.used_bytes();
        plan(&versions, used, needed, capacity, pinned, next_use)
    }
}

/// Unpinned versions in the order they go: incomplete ones first, then the one whose next use
/// is furthest away (absent: no known use), then the largest.
pub fn eviction_order<'a>(
    versions: &'a [CachedVersion],
    pinned: &BTreeSet<(String, String)>,
    next_use: &BTreeMap<(String, String), usize>,
) -> Vec<&'a CachedVersion> {
    let mut candidates: Vec<&CachedVersion> = versions
        .iter()
        .filter(|v| !pinned.contains(&key(v)))
        .collect();
    candidates.sort_by_key(|v| {
        (
            v.complete,
            std::cmp::Reverse(next_use.get(&key(v)).copied().unwrap_or(usize::MAX)),
            std::cmp::Reverse(v.unique_bytes),
            key(v),
        )
    });
    candidates
}

/// The eviction decision, from a listing (pure, for tests and for the controller's view).
pub fn plan(
    versions: &[CachedVersion],
    used: u64,
    needed: u64,
    capacity: u64,
    pinned: &BTreeSet<(String, String)>,
    next_use: &BTreeMap<(String, String), usize>,
) -> Result<Vec<(String, String)>, CacheError> {
    // What must go: the bytes needed plus any overshoot (capacity may have been lowered).
    let to_free = (used + needed).saturating_sub(capacity);
    if to_free == 0 {
        return Ok(Vec::new());
    }
    let candidates = eviction_order(versions, pinned, next_use);
    let (mut out, mut freed) = (Vec::new(), 0);
    for v in candidates {
        if freed >= to_free {
            break;
        }
        freed += v.unique_bytes;
        out.push(key(v));
    }
    if freed < to_free {
        let pinned_bytes = versions
            .iter()
            .filter(|v| pinned.contains(&key(v)))
            .map(|v| v.unique_bytes)
            .sum();
        return Err(CacheError::NoRoom {
            needed,
            free: capacity.saturating_sub(used),
            pinned: pinned_bytes,
        });
    }
    Ok(out)
}

fn key(v: &CachedVersion) -> (String, String) {
    (v.name.clone(), v.version.clone())
}
