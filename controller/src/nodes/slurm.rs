//! Nodes over the Slurm executor: what Slurm shows (foreign load, nodes down or draining) put
//! into the scheduler's books, and the orders about running attempts handed to the gate.

use crate::api::agent::AgentOrder;
use crate::engine::{Engine, PassNeed};
use crate::slurm_gate::submit::Submission;
use crate::slurm_gate::{GateOrder, SlurmView};
use labpool_lifecycle::Event;
use std::collections::BTreeMap;

/// The marks this engine put on nodes because of Slurm, so it lifts only its own.
#[derive(Debug, Default)]
pub struct SlurmMarks {
    /// Down in Slurm, with why.
    pub down: BTreeMap<String, String>,
    /// Draining in Slurm, with why.
    pub drain: BTreeMap<String, String>,
    /// Slurm's nodes that no agent serves, scheduled from what Slurm says they have.
    pub agentless: std::collections::BTreeSet<String>,
    /// Slurm's shards on each GPU, by node (from the last poll).
    pub shards: BTreeMap<String, u32>,
}

impl Engine {
    /// Takes what the gate read from Slurm.
    pub(crate) async fn on_slurm_view(&mut self, view: SlurmView) -> anyhow::Result<()> {
        self.pass_need = PassNeed::Full;
        self.take_slurm_nodes(&view.nodes).await?;
        self.slurm_marks.shards = view.shards.clone();
        let names: Vec<String> = self.sched.nodes().map(|n| n.name().to_string()).collect();
        for name in &names {
            let wanted = view.foreign.get(name).cloned().unwrap_or_default();
            self.sched.set_foreign(name, &wanted);
        }
        for (node, why) in &view.down {
            if self.slurm_marks.down.contains_key(node) || !names.contains(node) {
                continue;
            }
            tracing::warn!(node, why, "node DOWN in Slurm");
            self.slurm_marks.down.insert(node.clone(), why.clone());
            self.sched.set_node_down(node, Some(why.to_string()));
            self.lifecycle(Event::NodeDown {
                node: node.clone(),
                reason: why.clone(),
            });
        }
        let back: Vec<String> = self
            .slurm_marks
            .down
            .keys()
            .filter(|n| !view.down.contains_key(*n))
            .cloned()
            .collect();
        for node in back {
            self.slurm_marks.down.remove(&node);
            let agent_down = self.reach.remote.get(&node).is_some_and(|r| r.down);
            if !agent_down {
                tracing::info!(node, "node up again in Slurm");
                self.sched.set_node_down(&node, None);
                self.lifecycle(Event::NodeUp { node });
            }
        }
        for (node, why) in &view.drain {
            if !self.slurm_marks.drain.contains_key(node) && names.contains(node) {
                self.slurm_marks.drain.insert(node.clone(), why.clone());
                self.sched.set_node_drain(node, Some(why.clone()));
            }
        }
        let undrained: Vec<String> = self
            .slurm_marks
            .drain
            .keys()
            .filter(|n| !view.drain.contains_key(*n))
            .cloned()
            .collect();
        for node in undrained {
            self.slurm_marks.drain.remove(&node);
            self.sched.set_node_drain(&node, None);
        }
        Ok(())
    }

    /// Over the Slurm executor: which datasets each node holds complete in its current
    /// version, for the gate to mirror as Slurm node features (`ds_<name>`).
    pub(crate) fn tell_gate_holdings(&self) {
        let Some(gate) = &self.reach.gate else {
            return;
        };
        let mut holdings: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (node, cache) in &self.data.caches {
            let held = holdings.entry(node.clone()).or_default();
            for v in cache.inventory.versions.iter().filter(|v| v.complete) {
                let current = self
                    .data
                    .datasets
                    .get(&v.name)
                    .is_some_and(|d| d.current == v.version);
                if current && !held.contains(&v.name) {
                    held.push(v.name.clone());
                }
            }
            held.sort();
        }
        let _ = gate.send(GateOrder::Holdings(holdings));
    }

    /// Over the Slurm executor, an order about running attempts goes to the gate; any other
    /// order (stages, inventory) is given back for the node's agent.
    pub(crate) fn to_gate(&self, node: &str, order: AgentOrder) -> Option<AgentOrder> {
        let Some(gate) = &self.reach.gate else {
            return Some(order);
        };
        let order = match order {
            AgentOrder::Start(launch) => {
                if launch.gang.as_ref().is_some_and(|g| g.index > 0) {
                    // A gang's other nodes: Slurm starts them with its own job.
                    return None;
                }
                GateOrder::Start(Box::new(self.submission(node, *launch)))
            }
            AgentOrder::Adopt { mut expected } => {
                // The gate answers for an attempt from its batch node: a gang's other nodes
                // run no Slurm job of their own.
                expected.retain(|(job, _)| !self.gang_part_on(*job, node));
                GateOrder::Agent {
                    node: node.to_string(),
                    order: AgentOrder::Adopt { expected },
                }
            }
            AgentOrder::Kill { job, .. }
            | AgentOrder::Notice { job, .. }
            | AgentOrder::Signal { job, .. }
            | AgentOrder::Forget { job, .. }
                if self.gang_part_on(job, node) =>
            {
                // The same order goes to the gang's batch node, whose Slurm job is the gang's.
                return None;
            }
            o @ (AgentOrder::Kill { .. }
            | AgentOrder::Notice { .. }
            | AgentOrder::Signal { .. }
            | AgentOrder::Forget { .. }) => GateOrder::Agent {
                node: node.to_string(),
                order: o,
            },
            other => return Some(other),
        };
        let _ = gate.send(order);
        None
    }

    /// True when `node` holds a part of job `job`'s gang other than its batch node.
    fn gang_part_on(&self, job: u64, node: &str) -> bool {
        self.jobs.job(job).is_some_and(|j| {
            let life = labpool_lifecycle::Tracked::life(j);
            life.node.as_deref() != Some(node) && life.is_on(node)
        })
    }

    /// An attempt as the gate submits it: its data directories on `node`, and the memory to
    /// ask for (its own, or its GPUs' share of the node's when it reserved none).
    fn submission(&self, node: &str, launch: crate::api::agent::Launch) -> Submission {
        let cache = self.nodes_facts.get(node).and_then(|f| f.cache_dir.clone());
        let mut data = Vec::new();
        let mut staged = Vec::new();
        for d in &launch.datasets {
            match (&d.stream, &cache) {
                (Some(shared), _) => data.push((d.name.clone(), shared.clone())),
                (None, Some(root)) => {
                    let dir = root.join(&d.name).join(&d.version);
                    staged.push(dir.clone());
                    data.push((d.name.clone(), dir));
                }
                (None, None) => {
                    tracing::error!(
                        node,
                        dataset = d.name,
                        "the node's agent did not say where its cache is"
                    );
                }
            }
        }
        let mem_mib = if launch.mem_mib > 0 {
            launch.mem_mib
        } else {
            self.sched.node(node).map_or(1024, |n| {
                let gpus = n.spec.gpus.len().max(1) as u64;
                let share = launch.gpus.len().max(1) as u64;
                (n.spec.mem_mib * share / gpus).max(1)
            })
        };
        let shards = self.slurm_shards(node, &launch);
        Submission {
            launch,
            node: node.to_string(),
            data,
            staged,
            mem_mib,
            shards,
        }
    }

    /// The Slurm shards an attempt that shares its card (a slice, `--gpu-share`) asks for: the
    /// part of the card it holds in labpool's books, in the node's Slurm shards, rounded up.
    /// None when it holds whole GPUs, or when Slurm has no shards on the node: it then asks for
    /// a whole GPU (`--gres=gpu:1`), which Slurm cannot share; the log and `labpool doctor` say
    /// so.
    fn slurm_shards(&self, node: &str, launch: &crate::api::agent::Launch) -> Option<u32> {
        let alloc = self
            .sched
            .allocation(labpool_scheduler::job::JobId(launch.job))?;
        let units = u32::from(alloc.held_units());
        if units == 0 {
            return None;
        }
        let share = self
            .sched
            .node(node)?
            .spec
            .gpus
            .iter()
            .find(|g| Some(&g.index) == alloc.gpus.first())?
            .share
            .max(1);
        let Some(per_gpu) = self.slurm_marks.shards.get(node).copied() else {
            tracing::warn!(
                node,
                job = launch.job,
                "the job holds part of a card (a slice or --gpu-share), but Slurm has no shards on the node (GresTypes=shard, Gres=shard:N): it asks Slurm for a whole GPU"
            );
            return None;
        };
        Some((units * per_gpu).div_ceil(share).clamp(1, per_gpu))
    }
}
