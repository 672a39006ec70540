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
    /// Its jobs' ports (`labpool forward`, notebooks).
    pub ports: std::sync::Arc<dyn JobPorts>,
    /// How it checkpoints GPU state, when it can: idle one-GPU sessions are suspended.
    pub checkpoint: Option<String>,
}

/// Why a job's port was not opened: its text is the member's.
#[derive(Debug, Clone)]
pub struct PortError {
    /// No process of the job listens there (else: it listens, but the connection failed).
    pub not_listening: bool,
    /// What happened, with the values.
    pub message: String,
}

/// A connection being made to a job's port.
pub type Opening = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<tokio::net::TcpStream, PortError>> + Send>,
>;

/// The ports of jobs running on a node, as its agent reaches them (`labpool_agent::forward`).
pub trait JobPorts: Send + Sync {
    /// Connects to `port` of attempt `attempt` of `job`, owned by `uid`, on this node.
    fn open(&self, job: u64, attempt: u32, uid: u32, port: u16) -> Opening;
}

/// Starts the in-process node with the config, its reports going to the sender given.
pub type StartEmbedded =
    fn(&Config, mpsc::UnboundedSender<AgentReport>) -> anyhow::Result<EmbeddedNode>;
