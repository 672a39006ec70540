//! `labpool nodes` and `labpool node drain`: the nodes as the API shows them, and drains.

use crate::api::agent::Heartbeat;
use crate::api::{GpuView, NodeView};
use crate::engine::Engine;
use crate::error::ApiError;
use crate::identity::Caller;
use labpool_scheduler::Timestamp;

impl Engine {
    /// Drains `node` (no new jobs; running ones finish) or resumes it. Kept across restarts.
    pub(crate) async fn drain(
        &mut self,
        node: &str,
        reason: Option<String>,
        caller: &Caller,
    ) -> anyhow::Result<Result<NodeView, ApiError>> {
        let what = if reason.is_some() {
            "drain nodes"
        } else {
            "resume nodes"
        };
        if let Err(e) = crate::http::admin_only(&self.config, caller, what) {
            return Ok(Err(e));
        }
        if let Some(r) = &reason
            && (r.trim().is_empty() || r.len() > 200)
        {
            return Ok(Err(ApiError::bad_request(
                "a drain needs a reason of 1 to 200 characters, for the people whose jobs wait",
                Some("labpool node drain NODE --reason \"disk replacement\"".to_string()),
            )));
        }
        let reason = reason.map(|r| format!("{r} (by {})", caller.user));
        if !self.sched.set_node_drain(node, reason.clone()) {
            let known: Vec<String> = self.sched.nodes().map(|n| n.name().to_string()).collect();
            return Ok(Err(ApiError::not_found(
                format!("no node {node:?}"),
                Some(format!("the nodes are: {}", known.join(", "))),
            )));
        }
        self.db.set_node_drain(node, reason.as_deref()).await?;
        match &reason {
            Some(r) => tracing::info!(node, reason = %r, "node draining"),
            None => tracing::info!(node, "node resumed"),
        }
        let view = self
            .node_views()
            .into_iter()
            .find(|n| n.name == node)
            .expect("the node was just found");
        Ok(Ok(view))
    }

    pub(crate) fn node_views(&self) -> Vec<NodeView> {
        self.sched
            .nodes()
            .map(|n| {
                let facts = self.nodes_facts.get(n.name());
                let gpus: Vec<GpuView> = n
                    .spec
                    .gpus
                    .iter()
                    .map(|g| GpuView {
                        index: g.index,
                        gpu_type: g.gpu_type.clone(),
                        product: g.product.clone(),
                        memory_mib: g.memory_mib,
                        uuid: g.uuid.clone(),
                        job: n.gpu_holders(g.index).first().map(|j| j.0),
                        jobs: n.gpu_holders(g.index).iter().map(|j| j.0).collect(),
                        share: g.share,
                        slices: g.slices.clone(),
                        units: n
                            .gpu_sharers(g.index)
                            .map(|j| u32::from(n.units_of(g.index, j)))
                            .collect(),
                        nvlink_peer: g.nvlink_peer,
                        util_percent: None,
                        temperature_c: None,
                    })
                    .collect();
                NodeView {
                    name: n.name().to_string(),
                    state: n.state(),
                    responding: n.not_responding.is_none(),
                    reason: n
                        .down
                        .clone()
                        .or_else(|| n.not_responding.clone())
                        .or_else(|| n.drain.clone()),
                    gpu_source: facts.map(|f| f.gpu_source.clone()).unwrap_or_default(),
                    isolation: facts.map(|f| f.isolation.describe()).unwrap_or_default(),
                    checkpoint: facts.and_then(|f| f.checkpoint.clone()),
                    gpus_free: gpus.iter().filter(|g| g.job.is_none()).count() as u32,
                    gpus,
                    cpus: n.spec.cpus,
                    cpus_used: n.spec.cpus - n.free_cpus(),
                    mem_mib: n.spec.mem_mib,
                    mem_used_mib: n.spec.mem_mib - n.free_mem_mib(),
                    agent: self.reach.remote.get(n.name()).map(|r| r.address.clone()),
                    agent_version: match self.reach.remote.get(n.name()) {
                        Some(r) if r.version.is_empty() => None,
                        Some(r) => Some(r.version.clone()),
                        None if self.reach.is_local(n.name()) => {
                            Some(crate::api::versions::THIS.to_string())
                        }
                        None => None,
                    },
                    last_seen: self.last_seen(n.name()).map(|t| crate::clock::rfc3339(t.0)),
                    load: self.heartbeat_of(n.name()).map(|b| b.load),
                    mem_available_mib: self.heartbeat_of(n.name()).map(|b| b.mem_available_mib),
                    features: n.spec.features.clone(),
                }
            })
            .collect()
    }

    /// A remote node's last heartbeat, for `labpool nodes`.
    pub(crate) fn heartbeat_of(&self, node: &str) -> Option<&Heartbeat> {
        self.reach.remote.get(node).and_then(|r| r.beat.as_ref())
    }

    /// When the controller last heard from a remote node, for `labpool nodes`.
    pub(crate) fn last_seen(&self, node: &str) -> Option<Timestamp> {
        self.reach
            .remote
            .get(node)
            .map(|r| Timestamp(r.last_seen_ms))
    }
}
