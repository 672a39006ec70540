//! The node the controller runs in-process (`[controller] local_node = true`, the embedded
//! default), as the controller and the agent share it. The binary's `serve` and `demo` start it
//! with the agent's code and hand the controller an [`EmbeddedNode`]; the controller knows the
//! agent only through this, and the agent knows nothing of the controller.

use crate::api::agent::{AgentOrder, AgentReport};
use crate::settings::Config;
use labpool_monitor::sample::NodeSample;
use labpool_scheduler::node::NodeSpec;
use tokio::sync::{mpsc, watch};

/// The latest GPU reading of a node (None before the first, and without NVML).
pub type Samples = watch::Receiver<Option<NodeSample>>;

/// What the controller needs of its in-process node.
pub struct EmbeddedNode {
    /// Name, GPUs, cores, memory.
    pub spec: NodeSpec,
    /// Where its GPUs came from (`nvml`, `virtual`, `none`).
    pub gpu_source: String,
    /// The cgroup isolation it offers.
    pub support: labpool_isolation::Support,
    /// The tools environments run with.
    pub tools: labpool_envs::tools::Tools,
    /// Its GPU readings.
    pub samples: Samples,
    /// Where its orders go: its executor, running.
    pub orders: mpsc::UnboundedSender<AgentOrder>,
}

/// Starts the in-process node with the config, its reports going to the sender given.
pub type StartEmbedded =
    fn(&Config, mpsc::UnboundedSender<AgentReport>) -> anyhow::Result<EmbeddedNode>;
