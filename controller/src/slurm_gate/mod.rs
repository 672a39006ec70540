//! labpool over the lab's Slurm: the admission gate. labpool keeps the queue and its policy
//! (tiers, credits, QOS, locality, backfill: the same scheduler and lifecycle cores); Slurm
//! keeps slurmd, cgroups, `srun` and accounting.
//!
//! The gate is a core and a shell, as the lifecycle is: [`core::GateCore`] takes orders and
//! what Slurm shows with the time and decides, with no I/O and no clock of its own; [`gate`]
//! runs Slurm's commands, parses their output and feeds the answers back.
//!
//! Decisions recorded here (docs/admin/slurm.md says what members see):
//! - Agents are optional: every node Slurm lists is scheduled from its `Gres=`, `CPUTot` and
//!   `RealMemory` ([`node::NodeLine::spec`]) until an agent registers for it; such a node reads
//!   datasets from the shared storage (see `crate::nodes::agentless`).
//! - The lifecycle runs as with agents: a placed job's datasets are staged by the labpool agent
//!   on the chosen node (agents on Slurm nodes only cache and serve peers; they never get a
//!   start order). When the stage is done, the engine's start order comes here instead of to
//!   the agent: the attempt is submitted held (`sbatch --hold --parsable`), pinned
//!   (`--nodelist`), tagged (`--comment=labpool:<job>:<attempt>`) and run as its owner
//!   (`--uid`/`--gid`), then released (`scontrol release`). It is submitted when its data is on
//!   the node rather than when it is placed: only then is its environment (the dataset paths)
//!   known, and a held job reserves nothing in Slurm, so holding it longer buys nothing.
//! - The tag is the idempotency key. After a controller restart the agents register again and
//!   the engine tells each node which attempts it should run (`Adopt`); the gate answers from
//!   Slurm's queue: a tagged job found is adopted (and released if it was still held), one
//!   missing never started (the lifecycle places it again under a new attempt), and a tagged
//!   job no attempt expects is cancelled. Nothing is submitted twice and nothing is lost.
//! - State comes from `squeue --json` (all jobs: 22.05 ignores its filters with `--json`) and
//!   `scontrol show node -o`, every `[executor] poll`. Slurm keeps a finished job in the queue
//!   for `MinJobAge` (300 s by default), so an end is seen as long as the controller is not
//!   down longer than that.
//! - Jobs without the tag are foreign load: the GPUs they hold are taken in the scheduler's
//!   books. A released job that Slurm has not started after `[executor] start_timeout` (a
//!   foreign job took its GPUs) is cancelled in Slurm and placed again.
//!   The GPUs a foreign job holds stay taken in the scheduler's books after the pool's job lets
//!   go of them (`Node::set_foreign` keeps the counts), so the job waits for a free node rather
//!   than being placed on the same one again.
//! - A multi-node job is one Slurm job pinned to all of its nodes: orders to its other nodes are
//!   dropped, the batch node's Slurm job answers for the gang (see [`submit`]). An interactive
//!   session is a job like any other: its host (`labpool session-host`) runs as the Slurm job.
//! - Time limits and `--signal` are Slurm's to enforce: they are passed to `sbatch`, and the
//!   member's script is the batch shell itself.
//! - A node whose labpool agent is lost is DOWN for labpool (its data can be neither staged
//!   nor checked): the lifecycle requeues its attempts, and the gate cancels their Slurm jobs
//!   (`GateOrder::NodeLost`), as an agent's attempts are fenced; an agent that rejoins has
//!   whatever it no longer runs cancelled (`Adopt`). A `Kill` keeps the attempt tracked until
//!   Slurm shows it ended, so a cancel or requeue is recorded from Slurm's CANCELLED.
//! - Slurm does not requeue labpool's jobs (`--no-requeue`): a node Slurm marks DOWN is a node
//!   down for labpool, whose rules requeue the job under a new attempt (or end it NODE_FAIL
//!   with `--no-requeue`), exactly as for a node whose agent stopped answering.

pub mod accounting;
pub mod command;
pub mod core;
pub mod doctor;
pub mod gate;
pub mod node;
pub mod outcome;
pub mod queue;
pub mod submit;
pub mod view;

pub use gate::{Gate, GateOrder};
pub use view::SlurmView;

use crate::api::agent::AgentReport;
use crate::engine::Request;
use crate::settings::{Config, ExecutorKind};
use tokio::sync::mpsc;

/// The pool's id in its jobs' comments: two pools (a test's, a lab's second controller) that
/// share one Slurm never take each other's jobs for their own. It is a hash of the state
/// directory, so it survives restarts.
pub fn pool_id(config: &Config) -> String {
    let h = blake3::hash(config.controller.state_dir.as_os_str().as_encoded_bytes());
    h.to_hex()[..12].to_string()
}

/// Starts the gate when `[executor] kind = "slurm"`; the sender the engine gives its orders to.
pub fn spawn(
    config: &Config,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    reports: mpsc::UnboundedSender<AgentReport>,
    engine: mpsc::Sender<Request>,
) -> Option<mpsc::UnboundedSender<GateOrder>> {
    let e = &config.executor;
    if e.kind != ExecutorKind::Slurm {
        return None;
    }
    let slurm = command::Slurm {
        bin: e.slurm_bin.clone(),
        conf: e.slurm_conf.clone(),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let gate = Gate::new(
        slurm,
        pool_id(config),
        e.start_timeout,
        clock,
        reports,
        engine,
    );
    tokio::spawn(gate.run(rx, e.poll));
    tracing::info!("jobs run through Slurm ({})", e.slurm_bin.display());
    Some(tx)
}
