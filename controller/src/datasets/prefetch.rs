//! Background stages: prefetches the pass predicts for queued jobs, and admins' warm-ups.

use crate::api::agent::StageFor;
use crate::datasets::errors::{admin_only, unknown_dataset, unknown_node};
use crate::engine::Engine;
use crate::error::ApiError;
use labpool_scheduler::cache_view::CacheView;

impl Engine {
    /// Notes the pass's prefetch predictions (they pin what they name) and starts the stages
    /// that are not under way yet. The pass's stage-ins were pinned before ([`Self::pin_held`]).
    pub(crate) fn prefetch(&mut self, predictions: Vec<(u64, String, String)>) {
        if predictions.is_empty() {
            return;
        }
        for (job, node, dataset) in &predictions {
            let Some(current) = self.data.datasets.get(dataset).map(|r| r.current.clone()) else {
                continue;
            };
            self.pin_for(node, (dataset.clone(), current), *job);
        }
        let view = self.pass_cache_view();
        for (job, node, dataset) in predictions {
            if self.has_no_cache(&node) {
                continue;
            }
            // Within the room pins leave: a prefetch never pushes out what others need.
            if !view.has_room(&node, std::slice::from_ref(&dataset)) {
                continue;
            }
            let versions = self.data.current(std::slice::from_ref(&dataset));
            let Some((name, version)) = versions.into_iter().next() else {
                continue;
            };
            if self.data.complete_on(&node, &name, &version)
                || self.data.in_flight(&node, &name, &version)
            {
                continue;
            }
            tracing::info!(
                job,
                node,
                name,
                version,
                "prefetching a queued job's dataset"
            );
            self.data
                .prefetched_on
                .entry(job)
                .or_default()
                .insert(node.clone());
            self.send_stage(&node, StageFor::Prefetch { job }, &[(name, version)]);
        }
    }

    /// Pins what the pass's held jobs wait for on the nodes they start on, as a prediction
    /// does, before any of the pass's stages is sent: one order's room never comes out of what
    /// another held job waits for. The last pass's pins and predictions go.
    pub(crate) fn pin_held(&mut self, holds: &[(u64, String, Vec<String>)]) {
        self.data.predicted.clear();
        for (job, node, datasets) in holds {
            for v in self.data.current(datasets) {
                self.pin_for(node, v, *job);
            }
        }
    }

    /// Keeps `version` on `node` for the queued `job` until the next pass says otherwise.
    fn pin_for(&mut self, node: &str, version: (String, String), job: u64) {
        self.data
            .predicted
            .entry(node.to_string())
            .or_default()
            .entry(version)
            .or_default()
            .insert(job);
    }

    /// Copies the data of jobs held until it is on the node they start on (a stage-in),
    /// queued on the node before prefetches. A version whose stage-in failed is not sent
    /// again: the pass then places the job, and its own stage reports the failure.
    pub(crate) fn stage_in(&mut self, holds: Vec<(u64, String, Vec<String>)>) {
        for (job, node, datasets) in holds {
            if self.has_no_cache(&node) {
                continue;
            }
            let missing: Vec<(String, String)> = self
                .data
                .current(&datasets)
                .into_iter()
                .filter(|(name, version)| {
                    let key = (node.clone(), name.clone(), version.clone());
                    !self.data.complete_on(&node, name, version)
                        && !self.data.in_flight(&node, name, version)
                        && !self.data.failures.contains_key(&key)
                })
                .collect();
            if missing.is_empty() {
                continue;
            }
            tracing::info!(
                job,
                node,
                ?missing,
                "staging a held job's datasets in before it starts"
            );
            // An agent a minor release behind does not know stage-ins (added after 0.1): it
            // gets the copy as a prefetch, queued behind placed jobs' stages.
            let knows = self.reach.is_local(&node)
                || self.reach.remote.get(&node).is_some_and(|r| {
                    crate::api::versions::of_this_minor(&r.version, crate::api::versions::THIS)
                });
            let purpose = if knows {
                StageFor::StageIn { job }
            } else {
                StageFor::Prefetch { job }
            };
            self.send_stage(&node, purpose, &missing);
        }
    }

    /// An admin's warm-up: stage `name`'s current version on `node` (or every node).
    pub(crate) fn warm_up(
        &mut self,
        name: &str,
        node: Option<&str>,
        admin: bool,
    ) -> Result<crate::api::data::StageQueued, ApiError> {
        if !admin {
            return Err(admin_only("cache stage"));
        }
        let Some(current) = self.data.datasets.get(name).map(|d| d.current.clone()) else {
            return Err(unknown_dataset(name, &self.data));
        };
        if let Some(n) = node
            && !self.sched.nodes().any(|x| x.name() == n)
        {
            return Err(unknown_node(n, &self.sched));
        }
        self.data.load_current(&[name.to_string()]);
        if self.data.streamed(name) {
            return Err(ApiError::bad_request(
                format!(
                    "dataset {name} is larger than every node's cache, so it is streamed from the shared storage, never staged"
                ),
                Some("give [cache] more capacity to have it staged".to_string()),
            ));
        }
        let nodes: Vec<String> = self
            .sched
            .nodes()
            .map(|n| n.name().to_string())
            .filter(|n| node.is_none_or(|want| want == n))
            .collect();
        let mut queued = Vec::new();
        for n in nodes {
            if self.data.complete_on(&n, name, &current) || self.data.in_flight(&n, name, &current)
            {
                continue;
            }
            self.send_stage(&n, StageFor::WarmUp, &[(name.to_string(), current.clone())]);
            queued.push(n);
        }
        Ok(crate::api::data::StageQueued {
            name: name.to_string(),
            version: current,
            nodes: queued,
        })
    }
}
