//! Peers for a stage: nodes that hold a version complete and can serve it to another node.

use crate::api::agent::PeerRef;
use crate::engine::Engine;
use labpool_scheduler::peers::peer_order;

impl Engine {
    /// Peers that hold `name@version` complete, for a stage on `node`: remote nodes that are
    /// up, in [`peer_order`] (the simulator's order too). The first is counted as serving
    /// until the stage ends.
    pub(crate) fn peers_for(&mut self, node: &str, name: &str, version: &str) -> Vec<PeerRef> {
        let serving = |peer: &str| {
            self.data
                .peer_serving
                .values()
                .filter(|s| s.as_str() == peer)
                .count()
        };
        let candidates: Vec<(&str, usize)> = self
            .reach
            .remote
            .iter()
            .filter(|(n, r)| n.as_str() != node && !r.down && !r.instance.is_empty())
            .filter(|(n, _)| self.reach.has_agent(n.as_str()))
            .filter(|(n, _)| self.data.complete_on(n, name, version))
            .map(|(n, _)| (n.as_str(), serving(n)))
            .collect();
        let peers: Vec<PeerRef> = peer_order(candidates)
            .into_iter()
            .map(|n| PeerRef {
                node: n.to_string(),
                address: self.reach.remote[n].address.clone(),
            })
            .collect();
        if let Some(first) = peers.first() {
            self.data.peer_serving.insert(
                (node.to_string(), name.to_string(), version.to_string()),
                first.node.clone(),
            );
        }
        peers
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
