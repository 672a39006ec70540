//! What one poll of Slurm shows the engine: Slurm's nodes and what they have, foreign load
//! (GPUs that jobs labpool did not submit hold) and the nodes Slurm has down or draining; and
//! the node features that mirror the datasets each node holds.

use crate::slurm_gate::node::NodeLine;
use crate::slurm_gate::queue::SlurmJob;
use labpool_scheduler::node::NodeSpec;
use std::collections::BTreeMap;

/// What Slurm shows, as the engine takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmView {
    /// Every node Slurm has, as labpool schedules one that no agent serves (`Gres=` GPUs).
    pub nodes: BTreeMap<String, NodeSpec>,
    /// GPUs that jobs labpool did not submit hold, per node and type.
    pub foreign: BTreeMap<String, BTreeMap<Option<String>, u32>>,
    /// Nodes Slurm has DOWN, with why.
    pub down: BTreeMap<String, String>,
    /// Nodes Slurm drains, with why.
    pub drain: BTreeMap<String, String>,
    /// Slurm's shards on each GPU, for the nodes that have them: what a slice asks Slurm for.
    pub shards: BTreeMap<String, u32>,
}

/// The prefix of the node features that mirror datasets.
pub const FEATURE_PREFIX: &str = "ds_";

/// The feature for a dataset: `ds_` and its name, with anything but letters, digits and `_`
/// written as `_` (Slurm's feature grammar).
pub fn feature_of(dataset: &str) -> String {
    let name: String = dataset
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{FEATURE_PREFIX}{name}")
}

/// Foreign load and node states from one poll.
pub(crate) fn view_of(nodes: &[NodeLine], queue: &[SlurmJob], pool: &str) -> SlurmView {
    let mut v = SlurmView::default();
    for n in nodes {
        v.nodes.insert(n.name.clone(), n.spec());
        let shards = n.shards_per_gpu();
        if shards > 0 {
            v.shards.insert(n.name.clone(), shards);
        }
        if n.is_down() {
            v.down.insert(
                n.name.clone(),
                format!("{} in Slurm: {}", n.state, n.reason),
            );
        } else if n.is_draining() {
            v.drain.insert(
                n.name.clone(),
                format!("{} in Slurm: {}", n.state, n.reason),
            );
        }
    }
    for j in queue
        .iter()
        .filter(|j| j.labpool(pool).is_none() && j.holds_resources())
    {
        for (node, gpus) in j.gpus_by_node() {
            let entry = v.foreign.entry(node).or_default();
            for (t, n) in gpus {
                *entry.entry(t).or_default() += n;
            }
        }
    }
    v
}
