//! How the engine reaches its nodes, as one owned part: the order channel of each node with an
//! agent (in-process, or remote over its order link), the remote agents' state, the client
//! their order links sign with, the controller's own node, and over the Slurm executor the
//! gate. "Can this node take orders, and where do they go" has one answer here.

use crate::api::agent::AgentOrder;
use crate::nodes::RemoteNode;
use crate::slurm_gate::GateOrder;
use crate::transport::SignedClient;
use std::collections::BTreeMap;
use tokio::sync::mpsc;

/// Where orders for each node go.
#[derive(Default)]
pub struct NodeReach {
    /// Each node with an agent: the channel its orders are sent on.
    orders: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>,
    /// Nodes served by remote agents.
    pub(crate) remote: BTreeMap<String, RemoteNode>,
    /// The client order links to remote agents sign with; `None` when no agents are taken.
    pub(crate) cluster: Option<SignedClient>,
    /// The controller's own node, when it runs one in-process.
    pub(crate) local: Option<String>,
    /// Over the Slurm executor: where orders about running attempts go instead of agents.
    pub(crate) gate: Option<mpsc::UnboundedSender<GateOrder>>,
}

impl NodeReach {
    /// Nodes whose agents take orders on `orders` (the in-process node's, at the start).
    pub fn new(orders: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>) -> NodeReach {
        NodeReach {
            orders,
            ..NodeReach::default()
        }
    }

    /// Where `node`'s orders go, while it has an agent.
    pub fn orders(&self, node: &str) -> Option<&mpsc::UnboundedSender<AgentOrder>> {
        self.orders.get(node)
    }

    /// `node` has an agent that takes orders now.
    pub fn has_agent(&self, node: &str) -> bool {
        self.orders.contains_key(node)
    }

    /// The nodes with an agent, by name.
    pub fn agent_nodes(&self) -> impl Iterator<Item = &str> {
        self.orders.keys().map(String::as_str)
    }

    /// Every agent's order channel, by node name.
    pub fn all_orders(&self) -> impl Iterator<Item = &mpsc::UnboundedSender<AgentOrder>> {
        self.orders.values()
    }

    /// `node`'s agent takes orders on `orders` from now on (a registration).
    pub fn connect(&mut self, node: &str, orders: mpsc::UnboundedSender<AgentOrder>) {
        self.orders.insert(node.to_string(), orders);
    }

    /// `node`'s agent takes no more orders (it went down).
    pub fn disconnect(&mut self, node: &str) {
        self.orders.remove(node);
    }

    /// `node` is the controller's own, in-process node.
    pub fn is_local(&self, node: &str) -> bool {
        self.local.as_deref() == Some(node)
    }

    /// `node` has an agent of its own, remote or in-process (over Slurm, a node may have none).
    pub fn has_own_agent(&self, node: &str) -> bool {
        self.remote.contains_key(node) || self.is_local(node)
    }
}
