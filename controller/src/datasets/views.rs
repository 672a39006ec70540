//! `labpool cache status`: each node's cache as the API shows it.

use crate::api::agent::StageFor;
use crate::api::data::{CacheStatus, CachedVersionView, StagingView};
use crate::clock::rfc3339;
use crate::datasets::errors::unknown_node;
use crate::engine::Engine;
use crate::error::ApiError;

impl Engine {
    /// Cache status of one node, or all.
    pub(crate) fn cache_status(&self, node: Option<&str>) -> Result<Vec<CacheStatus>, ApiError> {
        if let Some(n) = node
            && !self.sched.nodes().any(|x| x.name() == n)
        {
            return Err(unknown_node(n, &self.sched));
        }
        let mut out = Vec::new();
        for (name, cache) in &self.data.caches {
            if node.is_some_and(|n| n != name) {
                continue;
            }
            let pins = self.pins(name);
            let versions = cache
                .inventory
                .versions
                .iter()
                .map(|v| {
                    let key = (v.name.clone(), v.version.clone());
                    CachedVersionView {
                        current: self
                            .data
                            .datasets
                            .get(&v.name)
                            .is_some_and(|d| d.current == v.version),
                        name: v.name.clone(),
                        version: v.version.clone(),
                        complete: v.complete,
                        bytes: v.bytes,
                        unique_bytes: v.unique_bytes,
                        files: v.files,
                        uses: v.uses,
                        hits: v.hits,
                        last_use: v.last_use_ms.map(rfc3339),
                        pinned_by: pins.get(&key).into_iter().flatten().copied().collect(),
                    }
                })
                .collect();
            let staging = self
                .data
                .progress
                .iter()
                .filter(|((n, _), _)| n == name)
                .map(|((_, purpose), (d, v, p))| StagingView {
                    name: d.clone(),
                    version: v.clone(),
                    purpose: match purpose {
                        StageFor::Job { job, .. } => format!("job {job}"),
                        StageFor::Prefetch { job } => format!("prefetch for job {job}"),
                        StageFor::WarmUp => "warm-up".into(),
                        StageFor::StageIn { job } => format!("stage-in for job {job}"),
                    },
                    progress: p.clone(),
                })
                .collect();
            let queued = self
                .data
                .background
                .iter()
                .filter(|(n, _, _)| n == name)
                .map(|(_, d, v)| format!("{d}@{v}"))
                .collect();
            let failed = self
                .data
                .failures
                .iter()
                .filter(|((n, _, _), _)| n == name)
                .map(|((_, d, v), why)| format!("{d}@{v}: {why}"))
                .collect();
            out.push(CacheStatus {
                node: name.clone(),
                capacity: cache.capacity,
                used_bytes: cache.inventory.used_bytes,
                versions,
                staging,
                queued,
                failed,
            });
        }
        Ok(out)
    }
}
