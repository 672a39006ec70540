//! Pinning and eviction: which versions go to make room, and removing them.
//!
//! A pinned version (one a running or coming job reads) never goes. The decision is a pure
//! function of a listing, so the controller can make it from its own view of a node.

use crate::error::CacheError;
use crate::inventory::CachedVersion;
use crate::layout::{BASE, COMPLETE, JOURNAL, MANIFEST, STATS, TAKEN};
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
        for suffix in [MANIFEST, BASE, TAKEN, JOURNAL, STATS] {
            let _ = std::fs::remove_file(self.side(name, version, suffix));
        }
        let parent = self.root().join(name);
        if std::fs::read_dir(&parent).is_ok_and(|mut d| d.next().is_none()) {
            let _ = std::fs::remove_dir(&parent);
        }
        Ok(())
    }

    /// Versions to remove so that `needed` more bytes fit within `capacity`: never a pinned one,
    /// the others in [`order`] (`next_use`: queue position; absent: no known use).
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

/// What the eviction order weighs of a cached dataset version. One order serves the node's
/// cache ([`eviction_order`]) and the simulator's model of it, so that the simulator's figures
/// are the daemon's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<K> {
    /// The caller's name for it.
    pub key: K,
    /// Staged completely (an incomplete one goes first: nothing can read it yet).
    pub complete: bool,
    /// Position in the queue of the first job that reads it; None: no known use.
    pub next_use: Option<usize>,
    /// Last use, ms; None: never used (it goes before any used one).
    pub last_use_ms: Option<i64>,
    /// Bytes removing it frees.
    pub bytes: u64,
}

/// Whether a prefetch of data whose first reader sits at queue position `prefetch_pos` may
/// evict a version next read at `next_use` (None: no queued job reads it): only data no queued
/// job reads sooner. Evicting what an earlier job reads would be undone by that job's own copy,
/// and two prefetches could evict each other's data without end. The node cache and the
/// simulator both ask this.
pub fn prefetch_may_evict(next_use: Option<usize>, prefetch_pos: usize) -> bool {
    next_use.is_none_or(|n| n > prefetch_pos)
}

/// The candidates' keys in the order they go: incomplete ones first; then the one whose next
/// use is furthest away (no known use is furthest); among equals the least recently used (the
/// best guess left), then the largest, then by key, so the order is the same run after run.
pub fn order<K: Ord + Clone>(mut candidates: Vec<Candidate<K>>) -> Vec<K> {
    candidates.sort_by(|a, b| {
        let rank = |c: &Candidate<K>| {
            (
                c.complete,
                std::cmp::Reverse(c.next_use.unwrap_or(usize::MAX)),
                c.last_use_ms,
                std::cmp::Reverse(c.bytes),
            )
        };
        rank(a).cmp(&rank(b)).then_with(|| a.key.cmp(&b.key))
    });
    candidates.into_iter().map(|c| c.key).collect()
}

/// Unpinned versions in the order they go ([`order`]).
pub fn eviction_order<'a>(
    versions: &'a [CachedVersion],
    pinned: &BTreeSet<(String, String)>,
    next_use: &BTreeMap<(String, String), usize>,
) -> Vec<&'a CachedVersion> {
    let candidates = versions
        .iter()
        .enumerate()
        .filter(|(_, v)| !pinned.contains(&key(v)))
        .map(|(i, v)| Candidate {
            key: (key(v), i),
            complete: v.complete,
            next_use: next_use.get(&key(v)).copied(),
            last_use_ms: v.last_use_ms,
            bytes: v.unique_bytes,
        })
        .collect();
    order(candidates)
        .into_iter()
        .map(|(_, i)| &versions[i])
        .collect()
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
