//! Background stages: prefetches the pass predicts for queued jobs, and admins' warm-ups.

use crate::api::agent::StageFor;
use crate::datasets::errors::{admin_only, unknown_dataset, unknown_node};
use crate::engine::Engine;
use crate::error::ApiError;
use labpool_scheduler::cache_view::CacheView;

impl Engine {
    /// Notes the pass's prefetch predictions (they pin what they name) and starts the stages
    /// that are not under way yet.
    pub(crate) fn prefetch(&mut self, predictions: Vec<(u64, String, String)>) {
        self.data.predicted.clear();
        if predictions.is_empty() {
            return;
        }
        for (job, node, dataset) in &predictions {
            let Some(current) = self.data.datasets.get(dataset).map(|r| r.current.clone()) else {
                continue;
            };
            self.data
                .predicted
                .entry(node.clone())
                .or_default()
                .entry((dataset.clone(), current))
                .or_default()
                .insert(*job);
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
