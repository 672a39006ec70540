//! What goes into the lifecycle ([`Event`]) and what comes out ([`Effect`]).

use crate::rules::{Outcome, Readiness, Stale};
use crate::transition::{Placement, StageKind, Transition};

/// Something that happened to a job or a node. The shell stamps each with `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The scheduler placed the job's next attempt.
    Placed {
        /// The job.
        job: u64,
        /// Where.
        placement: Placement,
        /// Whether it can start now, or waits for a stage.
        ready: Readiness,
    },
    /// The scheduler says why a pending job waits.
    Waiting {
        /// The job.
        job: u64,
        /// Reason word.
        code: String,
        /// Reason in words.
        detail: String,
    },
    /// A stage of a staging attempt made progress.
    StageProgress {
        /// The job.
        job: u64,
        /// The attempt staged for.
        attempt: u32,
        /// How far, in words.
        detail: String,
    },
    /// A stage of a staging attempt finished; `next` says what the attempt waits for now.
    Staged {
        /// The job.
        job: u64,
        /// The attempt staged for.
        attempt: u32,
        /// Lines for the job's log (what was copied).
        notes: Vec<String>,
        /// What comes next.
        next: Readiness,
    },
    /// A pending job's data was copied to the node it will start on before it was placed (a
    /// stage-in): lines for its log, as a staging attempt's `Staged` gives.
    StagedIn {
        /// The job.
        job: u64,
        /// Lines for the job's log (what was copied).
        notes: Vec<String>,
    },
    /// A stage of a staging attempt failed. With `retry` the job waits again with that reason
    /// (a full cache), otherwise it ends FAILED.
    StageFailed {
        /// The job.
        job: u64,
        /// The attempt staged for.
        attempt: u32,
        /// Why, in words.
        why: String,
        /// The reason word to wait with, when it may try again.
        retry: Option<String>,
    },
    /// A node reported an attempt's end.
    Ended {
        /// The reporting node.
        node: String,
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// How it ended.
        outcome: Outcome,
    },
    /// The executor says when an attempt really began to run (over Slurm: Slurm's start time,
    /// which may follow the start order by the time Slurm took). Its start, and its charge,
    /// count from then.
    RunningSince {
        /// The reporting node.
        node: String,
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// When it began, ms.
        time: i64,
    },
    /// A node reported that an attempt's start order never reached a shim, or (over Slurm)
    /// that Slurm did not start it.
    NeverStarted {
        /// The reporting node.
        node: String,
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// Why it did not start, when it is not a start order lost with a restart.
        why: Option<String>,
    },
    /// Someone (allowed to) cancels the job.
    Cancel {
        /// The job.
        job: u64,
        /// Who.
        by: String,
    },
    /// The scheduler took a waiting job out of the queue: it could no longer end before its
    /// `--deadline`.
    Expire {
        /// The job.
        job: u64,
        /// Why, in words.
        detail: String,
    },
    /// A running job is to be stopped and wait again as a new attempt; the shell has checked
    /// that `by` may.
    Requeue {
        /// The job.
        job: u64,
        /// Who.
        by: String,
    },
    /// The scheduler preempts a running job for a waiting one: it gets its notice, and is
    /// stopped (then requeued) when the grace period ends.
    Preempt {
        /// The running job.
        job: u64,
        /// The waiting job that takes its GPUs.
        by: u64,
        /// Why it could be preempted, in words.
        cause: String,
    },
    /// A waiting job is held (`Some`) or released (`None`) by `by`; the shell has checked
    /// that `by` may.
    Hold {
        /// The job.
        job: u64,
        /// The hold, or `None` to release it.
        hold: Option<crate::life::Hold>,
        /// Who.
        by: String,
    },
    /// A node stopped answering.
    NodeDown {
        /// The node.
        node: String,
        /// Why, in words.
        reason: String,
    },
    /// A node (re)joined: it must keep only the attempts the lifecycle expects there, and it is
    /// told again to stop those whose cancel was asked for.
    NodeUp {
        /// The node.
        node: String,
    },
    /// A node checkpointed a running attempt's GPU state to host memory (an idle session): its
    /// GPUs go back to the pool while its processes live on.
    Suspended {
        /// The reporting node.
        node: String,
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
    },
    /// A suspended job's owner came back and the scheduler gave it its GPUs again: its node
    /// restores its GPU state on them.
    Resume {
        /// The job.
        job: u64,
    },
    /// After a restart, a reloaded job that held GPUs (staging or running) cannot hold them
    /// again: its node or GPUs are gone from the configuration. It ends NODE_FAIL; a copy left
    /// running on a node is killed by that node's fence, as the job is no longer expected there.
    Unrestorable {
        /// The job.
        job: u64,
        /// Why, in words (the scheduler's refusal).
        why: String,
    },
}

/// What the shell must do. Every [`Effect::Persist`] of a batch is written (one transaction)
/// before any other effect of that batch is carried out: an order a node acts on is always on
/// disk first, so a controller killed in between redoes it, never forgets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Write this change of this job.
    Persist {
        /// The job.
        job: u64,
        /// The change, already applied in memory.
        transition: Transition,
    },
    /// Start this attempt's shim on its node.
    Launch {
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// Where.
        node: String,
        /// It waited for a stage first (its run starts now, not at placement; its datasets were
        /// not already cached when it was placed).
        staged: bool,
    },
    /// Put the attempt's datasets or environment on its node.
    Stage {
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// Where.
        node: String,
        /// What.
        kind: StageKind,
    },
    /// Give this attempt its preemption notice on its node: its `--signal` (or TERM) and the
    /// notice file now, and the stop (TERM, grace, KILL) when the grace period ends.
    Notice {
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// Where.
        node: String,
        /// The waiting job that takes its GPUs.
        by: u64,
    },
    /// Stop this attempt on its node (TERM, grace, KILL).
    Kill {
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// Where.
        node: String,
    },
    /// The node may drop what it keeps of an ended attempt.
    Forget {
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// Where.
        node: String,
    },
    /// The node keeps these attempts and kills any other it runs (the fence after a rejoin).
    Adopt {
        /// The node.
        node: String,
        /// (job, attempt) it must be running.
        expected: Vec<(u64, u32)>,
    },
    /// The waiting job was held or released: the scheduler must know.
    HoldChanged {
        /// The job.
        job: u64,
        /// Its hold now.
        hold: Option<labpool_scheduler::HoldBy>,
    },
    /// The job left the queue unplaced (cancelled while pending).
    Dequeue {
        /// The job.
        job: u64,
    },
    /// The job's attempt let go of its node: it waits again, keeping its place in the queue.
    Requeue {
        /// The job.
        job: u64,
        /// The attempt ran and is charged for the time it held its GPUs (a requeue its owner or
        /// an admin asked for); an attempt lost with its node, or never started, is not.
        charged: bool,
    },
    /// The job ended: its GPUs are free, its time is charged, and the shell drops its record
    /// (with [`crate::Lifecycle::remove`]) once done with it.
    Release {
        /// The job.
        job: u64,
        /// It was staging: nothing ran, nothing is charged, and its stage is let go.
        was_staging: bool,
    },
    /// The attempt's GPUs went back to the pool: the scheduler frees them, keeping its cores
    /// and memory.
    Suspend {
        /// The job.
        job: u64,
    },
    /// Restore the suspended attempt's GPU state on its GPUs, which it holds again.
    Restore {
        /// The job.
        job: u64,
        /// The attempt.
        attempt: u32,
        /// Where.
        node: String,
        /// Its GPUs.
        gpus: Vec<u32>,
    },
    /// A report was not taken; the shell logs it.
    Ignored {
        /// The job.
        job: u64,
        /// The attempt reported.
        attempt: u32,
        /// The node that reported.
        node: String,
        /// Why.
        why: Stale,
    },
}
