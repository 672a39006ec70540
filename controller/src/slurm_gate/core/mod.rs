//! The gate's decisions, with no I/O: the lifecycle core's shape. Orders from the engine and
//! what the shell read of Slurm come in as [`GateEvent`]s with `now`; Slurm commands to run and
//! reports for the engine go out as [`GateEffect`]s, in the order they must happen. The shell
//! ([`crate::slurm_gate::gate`]) only runs commands, parses what they print, and feeds the
//! answers back; the harness in `tests.rs` runs the core against a fake Slurm with seeded
//! faults.
//!
//! Invariants the harness checks at every step: no attempt is submitted twice, nothing keeps
//! running in Slurm that labpool no longer expects, and every end is reported once.

use crate::api::agent::AgentReport;
use crate::slurm_gate::GateOrder;
use crate::slurm_gate::node::NodeLine;
use crate::slurm_gate::queue::SlurmJob;
use crate::slurm_gate::submit::Submission;
use crate::slurm_gate::view::SlurmView;
use std::collections::{BTreeMap, BTreeSet};

mod observe;
mod orders;
#[cfg(test)]
mod tests;

/// What comes into the core.
#[derive(Debug)]
pub enum GateEvent {
    /// An order of the engine's.
    Order(GateOrder),
    /// The shell ran a [`GateEffect::Submit`]: Slurm's id for the held job, or why not.
    Submitted {
        /// The attempt.
        key: (u64, u32),
        /// The node it was for.
        node: String,
        /// Slurm's id, or why there is none.
        result: Result<u64, SubmitFailure>,
    },
    /// The orders that came together are carried out: submitted jobs are released.
    BatchDone,
    /// Slurm's queue and nodes, as one poll read them.
    Observed {
        /// `squeue --json`.
        queue: Vec<SlurmJob>,
        /// `scontrol show node -o`.
        nodes: Vec<NodeLine>,
    },
    /// Slurm's queue could not be read (slurmctld restarting or unreachable).
    Unreachable,
    /// Slurm's accounting, asked for after [`GateEffect::Account`].
    Accounted {
        /// The attempts it was asked about.
        missing: Vec<(u64, u32)>,
        /// Its records of the last days.
        records: Vec<SlurmJob>,
    },
}

/// Why sbatch did not take a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitFailure {
    /// Slurm could not be reached: the attempt is placed again rather than failed.
    pub transient: bool,
    /// What Slurm said.
    pub text: String,
}

/// What the core asks of the shell.
#[derive(Debug, Clone)]
pub enum GateEffect {
    /// `sbatch --hold` the attempt, then answer with [`GateEvent::Submitted`].
    Submit(Box<Submission>),
    /// `scontrol release` these jobs.
    Release(Vec<u64>),
    /// `scancel` these jobs.
    Cancel(Vec<u64>),
    /// `scancel --signal` a job (`--batch` or `--full` when `which` says).
    Signal {
        /// Slurm's id.
        slurm: u64,
        /// The signal.
        signal: i32,
        /// `--batch`, `--full`, or the steps (None).
        which: Option<&'static str>,
    },
    /// Set a node's features.
    SetFeatures {
        /// The node.
        node: String,
        /// All of its features.
        features: Vec<String>,
    },
    /// Read the queue and the nodes now, and answer with [`GateEvent::Observed`].
    Observe,
    /// Read Slurm's accounting and answer with [`GateEvent::Accounted`] (nothing, on error:
    /// the attempts stay tracked and are looked for again).
    Account(Vec<(u64, u32)>),
    /// Tell the engine.
    Report(AgentReport),
    /// Tell the engine what Slurm shows.
    View(SlurmView),
}

/// One attempt the gate answers for.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub(crate) node: String,
    /// Slurm's id, once known.
    pub(crate) slurm: Option<u64>,
    /// When it was released (ms), while it has not been seen running.
    pub(crate) released: Option<i64>,
    /// Known only from an adoption: it is looked for by its tag.
    pub(crate) adopted: bool,
    /// Its stop is due then, ms (after a preemption notice).
    pub(crate) stop_at: Option<i64>,
    /// The start time reported, ms.
    pub(crate) started_ms: Option<i64>,
    /// labpool stopped it (cancel, requeue, preemption): cancelled in Slurm, its end is still
    /// reported from the queue.
    pub(crate) kill: bool,
}

/// The gate's state.
#[derive(Debug)]
pub struct GateCore {
    pool: String,
    start_timeout_ms: i64,
    tracked: BTreeMap<(u64, u32), Tracked>,
    /// Nodes told what they run since the gate started: a tagged job there that is not
    /// tracked is an orphan and is cancelled.
    adopted: BTreeSet<String>,
    last_view: Option<SlurmView>,
    /// The datasets each node holds, as the engine last said.
    holdings: BTreeMap<String, Vec<String>>,
    /// Submitted and held, to be released together.
    held: Vec<u64>,
}

impl GateCore {
    /// A core for the jobs of pool `pool`, placing again what Slurm has not started within
    /// `start_timeout_ms` of its release.
    pub fn new(pool: String, start_timeout_ms: i64) -> GateCore {
        GateCore {
            pool,
            start_timeout_ms,
            tracked: BTreeMap::new(),
            adopted: BTreeSet::new(),
            last_view: None,
            holdings: BTreeMap::new(),
            held: Vec::new(),
        }
    }

    /// Takes one event at `now_ms`; the effects, in the order the shell must carry them out.
    pub fn handle(&mut self, event: GateEvent, now_ms: i64) -> Vec<GateEffect> {
        let mut out = Vec::new();
        match event {
            GateEvent::Order(GateOrder::Start(s)) => self.start(*s, &mut out),
            GateEvent::Order(order) => {
                // Starts before this order are released first, as they came.
                self.release_held(&mut out);
                self.order(order, now_ms, &mut out);
            }
            GateEvent::Submitted { key, node, result } => {
                self.submitted(key, node, result, now_ms, &mut out)
            }
            GateEvent::BatchDone => self.release_held(&mut out),
            GateEvent::Observed { queue, nodes } => self.observed(&queue, &nodes, now_ms, &mut out),
            GateEvent::Unreachable => {
                // While slurmctld does not answer, no job can start: the start timeout counts
                // again from when it answers.
                for t in self.tracked.values_mut() {
                    if t.released.is_some() {
                        t.released = Some(now_ms);
                    }
                }
            }
            GateEvent::Accounted { missing, records } => {
                self.accounted(missing, &records, now_ms, &mut out)
            }
        }
        out
    }

    /// The attempts it answers for, for the harness's checks.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> &BTreeMap<(u64, u32), Tracked> {
        &self.tracked
    }

    fn release_held(&mut self, out: &mut Vec<GateEffect>) {
        if !self.held.is_empty() {
            out.push(GateEffect::Release(std::mem::take(&mut self.held)));
        }
    }
}

/// Cancels `ids`, if any.
fn cancel(ids: Vec<u64>, out: &mut Vec<GateEffect>) {
    if !ids.is_empty() {
        out.push(GateEffect::Cancel(ids));
    }
}
