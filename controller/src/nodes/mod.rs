//! Nodes in the engine: nodes served by remote agents (`labpool agent`), their registration,
//! heartbeats and order links, what happens when one stops answering, peers for stages, and
//! `labpool nodes`/`node drain`, with the nodes table.
//!
//! Decisions recorded here:
//! - The per-job epoch is the attempt number. Every order and report names (job, attempt); a
//!   requeued job runs again under the next attempt; a report about any other attempt than the
//!   current one is ignored, and a node that registers is told exactly which attempts it should
//!   be running (`Adopt`): it kills every other. So a node that comes back after it was
//!   declared DOWN never keeps running a job that was requeued or failed meanwhile.
//! - Orders go to an agent over one link at a time; a new registration opens a new link and
//!   the agent refuses orders from the old one, so nothing sent before the fence lands after.
//! - A node that misses three heartbeats, or whose orders cannot be delivered (its agent
//!   listens where the controller cannot reach), is shown not responding (`IDLE*`, Slurm's
//!   `idle*`): nothing new is placed there, and `nodes`, `sinfo`, `why` and `doctor` say why.
//!   Its jobs keep their GPUs meanwhile; it answers again with its next heartbeat (or order
//!   taken).
//! - A node that misses heartbeats for `node_timeout`, or whose orders cannot be delivered for
//!   that long, goes DOWN: its running jobs are requeued (or end NODE_FAIL with
//!   `--no-requeue`), its staging jobs wait again.
//! - After a controller restart, nodes known to have agents wait `node_timeout` to register
//!   again before they are declared DOWN; their jobs keep their GPUs meanwhile.
//! - Over the Slurm executor, a node needs no agent: see [`agentless`].

pub mod agentless;
pub mod agents;
pub mod db;
pub mod faults;
pub mod link;
pub mod peers;
pub mod reach;
pub mod slurm;
pub mod views;

pub use agents::{LinkState, LinkTrouble, RemoteNode, routes};
