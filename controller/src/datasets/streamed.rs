//! Datasets larger than every node's cache are streamed: a job that reads one runs against the
//! shared source directly (`LABPOOL_DATASET_<NAME>` is the registered path, which members can
//! only read), with a warning at submit and in `why`, instead of being refused. Nothing of it
//! is staged, prefetched or pinned. The simulator models the same rule (`labpool sim`).

use crate::datasets::DataState;
use labpool_units::format_size;

impl DataState {
    /// The largest node cache, once any node has reported one.
    pub(crate) fn largest_cache(&self) -> Option<u64> {
        self.caches.values().map(|c| c.capacity).max()
    }

    /// Bytes of `name`'s current version, when its manifest is loaded.
    fn current_bytes(&self, name: &str) -> Option<u64> {
        let current = &self.datasets.get(name)?.current;
        self.manifests
            .get(&(name.to_string(), current.clone()))
            .map(|m| m.bytes())
    }

    /// True when `name`'s current version is larger than every node's cache.
    pub(crate) fn streamed(&self, name: &str) -> bool {
        match (self.current_bytes(name), self.largest_cache()) {
            (Some(bytes), Some(largest)) => bytes > largest,
            _ => false,
        }
    }

    /// Loads the current manifests of `datasets`, so that [`DataState::streamed`] can tell.
    pub(crate) fn load_current(&mut self, datasets: &[String]) {
        for d in datasets {
            if let Some(current) = self.datasets.get(d).map(|r| r.current.clone()) {
                self.manifest(d, &current);
            }
        }
    }

    /// One line for each of `datasets` that is streamed, for submit and `why`.
    pub(crate) fn stream_notes(&self, datasets: &[String]) -> Vec<String> {
        datasets
            .iter()
            .filter(|d| self.streamed(d))
            .map(|d| {
                format!(
                    "dataset {d} ({}) is larger than every node's cache (the largest holds {}): the job reads it straight from the shared storage at ${} (read-only), which is slower than a local copy; an admin can give [cache] more capacity to have it staged",
                    format_size(self.current_bytes(d).unwrap_or(0)),
                    format_size(self.largest_cache().unwrap_or(0)),
                    labpool_cache::registry::env_var(d)
                )
            })
            .collect()
    }
}
