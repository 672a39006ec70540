//! What the scheduler may know about node-local dataset caches. The cache crate implements
//! this for the daemon; the simulator implements it with its cache model.

/// A read-only view of what each node's cache holds.
pub trait CacheView {
    /// Bytes of `dataset` already cached (complete) on `node`.
    fn cached_bytes(&self, node: &str, dataset: &str) -> u64;

    /// True when `node`'s cache can take the `datasets` it lacks, evicting only versions no
    /// job needs. A view without capacity limits always says yes.
    fn has_room(&self, _node: &str, _datasets: &[String]) -> bool {
        true
    }
}

/// A view in which nothing is cached anywhere.
pub struct NoCache;

impl CacheView for NoCache {
    fn cached_bytes(&self, _node: &str, _dataset: &str) -> u64 {
        0
    }
}
