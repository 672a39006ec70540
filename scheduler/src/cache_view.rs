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

    /// Expected seconds to copy what `node` lacks of `datasets` onto it now (0 when it holds
    /// them all): the simulator divides by the links' current shares, the daemon by the rate
    /// its stages have been copying lately. `None` when the view cannot tell, which keeps delay
    /// scheduling off.
    fn copy_seconds(&self, _node: &str, _datasets: &[String]) -> Option<f64> {
        None
    }

    /// True when `node` lacks some of `datasets` (not all there and complete); a dataset
    /// read where it lies, never staged, is never lacking.
    fn lacks(&self, node: &str, datasets: &[String]) -> bool {
        datasets.iter().any(|d| self.cached_bytes(node, d) == 0)
    }

    /// Those of `datasets` that `node` lacks, in order.
    fn lacking(&self, node: &str, datasets: &[String]) -> Vec<String> {
        datasets
            .iter()
            .filter(|d| self.lacks(node, std::slice::from_ref(*d)))
            .cloned()
            .collect()
    }
}

/// A view in which nothing is cached anywhere.
pub struct NoCache;

impl CacheView for NoCache {
    fn cached_bytes(&self, _node: &str, _dataset: &str) -> u64 {
        0
    }
}
