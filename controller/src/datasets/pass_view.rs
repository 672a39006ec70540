//! What a scheduling pass sees of the caches ([`PassCacheView`]), and the pins that keep versions
//! in place.

use crate::engine::Engine;
use labpool_scheduler::cache_view::CacheView;
use std::collections::{BTreeMap, BTreeSet};

/// What one scheduling pass knows about the caches: fixed before the pass, so that the pass
/// stays a pure function of its inputs.
pub struct PassCacheView {
    /// (node, dataset) → bytes of its current version already there.
    cached: BTreeMap<(String, String), u64>,
    /// (node, dataset) → bytes staging it would copy.
    needed: BTreeMap<(String, String), u64>,
    /// Node → bytes a stage may still use: free space plus unpinned versions, less stages
    /// under way. Absent: the node's cache has not reported yet.
    spare: BTreeMap<String, u64>,
    /// (node, dataset) whose last stage found no room.
    blocked: BTreeSet<(String, String)>,
    /// Bytes per second stages have been copying lately.
    rate: Option<f64>,
    /// (node, dataset) whose current version is there complete.
    complete: BTreeSet<(String, String)>,
    /// (node, dataset) whose last stage-in or prefetch failed.
    failed: BTreeSet<(String, String)>,
    /// Nodes no agent serves: nothing is staged on them.
    no_cache: BTreeSet<String>,
}

impl CacheView for PassCacheView {
    fn cached_bytes(&self, node: &str, dataset: &str) -> u64 {
        self.cached
            .get(&(node.to_string(), dataset.to_string()))
            .copied()
            .unwrap_or(0)
    }

    fn has_room(&self, node: &str, datasets: &[String]) -> bool {
        if datasets
            .iter()
            .any(|d| self.blocked.contains(&(node.to_string(), d.clone())))
        {
            return false;
        }
        let Some(spare) = self.spare.get(node) else {
            return true;
        };
        let needed: u64 = datasets
            .iter()
            .map(|d| {
                self.needed
                    .get(&(node.to_string(), d.clone()))
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        needed <= *spare
    }

    /// What staging would copy to `node`, at the rate stages have been copying lately.
    fn copy_seconds(&self, node: &str, datasets: &[String]) -> Option<f64> {
        let rate = self.rate.filter(|r| *r > 0.0)?;
        let needed: u64 = datasets
            .iter()
            .filter_map(|d| {
                let need = self.needed.get(&(node.to_string(), d.clone()))?;
                Some(need.saturating_sub(self.cached_bytes(node, d)))
            })
            .sum();
        Some(needed as f64 / rate)
    }

    /// A dataset is lacking where its current version is not complete, unless it is streamed,
    /// the node has no cache, or the last background copy of it there failed (the job is then
    /// placed, and its own stage says why).
    fn lacks(&self, node: &str, datasets: &[String]) -> bool {
        if self.no_cache.contains(node) {
            return false;
        }
        datasets.iter().any(|d| {
            let key = (node.to_string(), d.clone());
            self.cached.contains_key(&key)
                && !self.complete.contains(&key)
                && !self.failed.contains(&key)
        })
    }
}

impl Engine {
    /// Versions that must stay on `node`: those its staging and running jobs read, and those
    /// the last pass predicted queued jobs will read there.
    pub(super) fn pins(&self, node: &str) -> BTreeMap<(String, String), BTreeSet<u64>> {
        let mut out: BTreeMap<(String, String), BTreeSet<u64>> = BTreeMap::new();
        for (job, versions) in &self.data.job_versions {
            let here = self.jobs.job(*job).is_some_and(|r| r.is_on(node));
            if here {
                for v in versions {
                    out.entry(v.clone()).or_default().insert(*job);
                }
            }
        }
        if let Some(p) = self.data.predicted.get(node) {
            for (v, jobs) in p {
                out.entry(v.clone()).or_default().extend(jobs);
            }
        }
        out
    }

    /// Queue position of the first pending job that reads each current version.
    pub(super) fn next_use(&self) -> Vec<((String, String), usize)> {
        let mut out: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (i, job) in self.sched.pending().enumerate() {
            for v in self.data.current(&job.datasets) {
                out.entry(v).or_insert(i);
            }
        }
        out.into_iter().collect()
    }

    /// The cache view for the next pass.
    pub(crate) fn pass_cache_view(&mut self) -> PassCacheView {
        let wanted: BTreeSet<String> = self
            .sched
            .pending()
            .flat_map(|j| j.datasets.iter().cloned())
            .collect();
        let nodes: Vec<String> = self.sched.nodes().map(|n| n.name().to_string()).collect();
        let wanted: BTreeSet<String> = {
            let all: Vec<String> = wanted.into_iter().collect();
            self.data.load_current(&all);
            // A streamed dataset needs no room and is cached nowhere.
            all.into_iter().filter(|d| !self.data.streamed(d)).collect()
        };
        let mut view = PassCacheView {
            cached: BTreeMap::new(),
            needed: BTreeMap::new(),
            spare: BTreeMap::new(),
            blocked: self.data.blocked.clone(),
            rate: self.data.stage_rate,
            complete: BTreeSet::new(),
            failed: BTreeSet::new(),
            no_cache: nodes
                .iter()
                .filter(|n| self.has_no_cache(n))
                .cloned()
                .collect(),
        };
        for node in &nodes {
            for d in &wanted {
                let Some(current) = self.data.datasets.get(d).map(|r| r.current.clone()) else {
                    continue;
                };
                let key = (node.clone(), d.clone());
                let complete = self.data.caches.get(node).and_then(|c| {
                    c.inventory
                        .versions
                        .iter()
                        .find(|v| v.complete && v.name == *d && v.version == current)
                        .map(|v| v.bytes)
                });
                let version = (node.clone(), d.clone(), current.clone());
                // Complete by its inventory, or reported staged since (as `complete_on` says,
                // without a second look through the inventory).
                let there = complete.is_some() || self.data.landed.contains(&version);
                if there {
                    view.complete.insert(key.clone());
                }
                if self.data.failures.contains_key(&version) {
                    view.failed.insert(key.clone());
                }
                let cached = match complete {
                    Some(bytes) => bytes.max(1),
                    // Reported staged, its inventory not in yet: all of it.
                    None if there => self
                        .data
                        .manifest(d, &current)
                        .map_or(1, |m| m.bytes().max(1)),
                    None => self
                        .data
                        .progress
                        .iter()
                        .filter(|((n, _), (name, v, _))| n == node && name == d && *v == current)
                        .map(|(_, (_, _, p))| p.bytes_done)
                        .max()
                        .unwrap_or(0),
                };
                view.cached.insert(key.clone(), cached);
                let needed = self.data.needed(node, d);
                view.needed.insert(key, needed);
            }
            let Some(cache) = self.data.caches.get(node) else {
                continue;
            };
            let pins = self.pins(node);
            // A dataset none of whose versions is pinned can go whole (files its versions
            // share counted once); otherwise only what its unpinned versions hold alone.
            let mut evictable = 0;
            for (name, own) in &cache.inventory.datasets {
                let versions = cache.inventory.versions.iter().filter(|v| v.name == *name);
                let (pinned, free): (Vec<_>, Vec<_>) =
                    versions.partition(|v| pins.contains_key(&(v.name.clone(), v.version.clone())));
                evictable += if pinned.is_empty() {
                    *own
                } else {
                    free.iter().map(|v| v.unique_bytes).sum()
                };
            }
            let under_way: u64 = self
                .data
                .progress
                .iter()
                .filter(|((n, _), _)| n == node)
                .map(|(_, (_, _, p))| p.bytes_total.saturating_sub(p.bytes_done))
                .sum();
            let spare = (cache.capacity + evictable)
                .saturating_sub(cache.inventory.used_bytes)
                .saturating_sub(under_way);
            view.spare.insert(node.clone(), spare);
        }
        view
    }
}
