//! Peers for a stage: nodes that hold a version complete and can serve it to another node.

use crate::api::agent::PeerRef;
use crate::controller::engine::Engine;

impl Engine {
    /// Peers that hold `name@version` complete, for a stage on `node`: remote nodes that are
    /// up, fewest stages served first, so eight nodes starting on one dataset spread over the
    /// nodes that have it. The first is counted as serving until the stage ends.
    pub(crate) fn peers_for(&mut self, node: &str, name: &str, version: &str) -> Vec<PeerRef> {
        let serving = |peer: &str| {
            self.data
                .peer_serving
                .values()
                .filter(|s| s.as_str() == peer)
                .count()
        };
        let mut candidates: Vec<(usize, String, String)> = self
            .remote
            .iter()
            .filter(|(n, r)| n.as_str() != node && !r.down && !r.instance.is_empty())
            .filter(|(n, _)| self.agents.contains_key(n.as_str()))
            .filter(|(n, _)| self.data.complete_on(n, name, version))
            .map(|(n, r)| (serving(n), n.clone(), r.address.clone()))
            .collect();
        candidates.sort();
        if let Some((_, first, _)) = candidates.first() {
            self.data.peer_serving.insert(
                (node.to_string(), name.to_string(), version.to_string()),
                first.clone(),
            );
        }
        candidates
            .into_iter()
            .map(|(_, node, address)| PeerRef { node, address })
            .collect()
    }

    /// A stage on `node` ended: the peers it used serve one stage less.
    pub(crate) fn peer_stage_ended(&mut self, node: &str, versions: &[(String, String)]) {
        for (name, version) in versions {
            self.data
                .peer_serving
                .remove(&(node.to_string(), name.clone(), version.clone()));
        }
    }
}
