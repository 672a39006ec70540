//! Over the Slurm executor, agents are optional: every node Slurm lists that no labpool agent
//! serves is scheduled from what Slurm says it has (`Gres=` GPUs, `CPUTot`, `RealMemory`,
//! features), read by the gate's poll.
//!
//! Decisions recorded here:
//! - Such a node has no dataset cache: its jobs read their datasets from the shared storage,
//!   as a dataset larger than every cache is read ([`Engine::has_no_cache`]); nothing is staged
//!   or prefetched there. A job that declares a dataset still prefers a node whose agent holds
//!   it, since that is where the scheduler finds its bytes cached.
//! - An agent that registers takes the node over (its NVML GPUs, its cache, its metrics); the
//!   doctor flags a node whose agent and Slurm's `Gres=` disagree. A node whose agent is then
//!   lost is DOWN for labpool, as without the gate, until its agent registers again: labpool
//!   cannot tell a stopped agent from a failing node.
//! - The nodes are recorded in the nodes table (`gpu_source` = `slurm`, no agent), so that
//!   after a controller restart their running jobs are admitted again; they wait, DOWN, for the
//!   gate's first poll, which brings them up and has the gate re-adopt what runs there.
//! - A node Slurm no longer lists is DOWN for labpool, its jobs requeued by labpool's rules.

use crate::engine::{Engine, NodeFacts, PassNeed};
use labpool_lifecycle::Event;
use labpool_scheduler::node::NodeSpec;
use std::collections::BTreeMap;

/// `gpu_source` of a node read from Slurm.
pub const SLURM_SOURCE: &str = "slurm";

/// The reason such a node shows after a restart, until the gate reads Slurm.
const WAITING: &str = "waiting for the first read of Slurm's nodes after a controller restart";

impl Engine {
    /// True when `node` is one of Slurm's nodes that no agent serves: it has no cache.
    pub(crate) fn has_no_cache(&self, node: &str) -> bool {
        self.slurm_marks.agentless.contains(node)
    }

    /// True when `node` is served by an agent or is the controller's own: Slurm's view of it
    /// is not taken.
    fn served_elsewhere(&self, node: &str) -> bool {
        self.reach.has_own_agent(node)
    }

    /// Takes Slurm's nodes: those no agent serves join, change, or leave the pool.
    pub(crate) async fn take_slurm_nodes(
        &mut self,
        nodes: &BTreeMap<String, NodeSpec>,
    ) -> anyhow::Result<()> {
        for (name, spec) in nodes {
            if self.served_elsewhere(name) {
                continue;
            }
            let joined = self.slurm_marks.agentless.contains(name);
            let changed = self.sched.node(name).map(|n| &n.spec) != Some(spec);
            if changed {
                if let Err(e) = self.sched.upsert_node(spec.clone()) {
                    tracing::warn!(node = name, "Slurm's node cannot be scheduled: {e}");
                    continue;
                }
                self.db
                    .upsert_node(spec, SLURM_SOURCE, self.clock.now_ms())
                    .await?;
                self.pass_need = PassNeed::Full;
            }
            // A node Slurm has DOWN stays so (upsert_node clears the mark).
            if let Some(why) = self.slurm_marks.down.get(name) {
                self.sched.set_node_down(name, Some(why.clone()));
            }
            if joined {
                continue;
            }
            self.slurm_marks.agentless.insert(name.clone());
            self.nodes_facts.insert(
                name.clone(),
                NodeFacts {
                    gpu_source: SLURM_SOURCE.to_string(),
                    isolation: labpool_isolation::Support::default(),
                    cache_dir: None,
                    checkpoint: None,
                },
            );
            if !self.slurm_marks.down.contains_key(name) {
                self.sched.set_node_down(name, None);
            }
            tracing::info!(
                node = name,
                gpus = spec.gpus.len(),
                "node taken from Slurm (no labpool agent: datasets are read from the shared storage)"
            );
            // The gate is told what runs there, and cancels what labpool does not expect.
            self.lifecycle(Event::NodeUp { node: name.clone() });
            self.pass_need = PassNeed::Full;
        }
        let gone: Vec<String> = self
            .slurm_marks
            .agentless
            .iter()
            .filter(|n| !nodes.contains_key(*n))
            .cloned()
            .collect();
        for node in gone {
            self.slurm_marks.agentless.remove(&node);
            let reason = "no longer in Slurm's node list (scontrol show node)".to_string();
            tracing::warn!(node, "{reason}");
            self.sched.set_node_down(&node, Some(reason.clone()));
            self.lifecycle(Event::NodeDown { node, reason });
            self.pass_need = PassNeed::Full;
        }
        Ok(())
    }

    /// After a restart, over Slurm: the nodes last taken from Slurm come back DOWN, holding
    /// their running jobs, until the gate's first poll.
    pub(crate) async fn restore_agentless(&mut self) -> anyhow::Result<()> {
        if self.config.executor.kind != crate::settings::ExecutorKind::Slurm {
            return Ok(());
        }
        for spec in self.db.nodes_from(SLURM_SOURCE).await? {
            let name = spec.name.clone();
            if self.served_elsewhere(&name) {
                continue;
            }
            if let Err(e) = self.sched.upsert_node(spec) {
                tracing::error!("{e}");
                continue;
            }
            self.sched.set_node_down(&name, Some(WAITING.to_string()));
        }
        Ok(())
    }
}
