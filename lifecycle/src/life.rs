//! The lifecycle part of a job's record: state, attempt, where it runs, when, how it ended.

use crate::transition::Transition;
use labpool_scheduler::JobState;
use std::path::PathBuf;

/// What the lifecycle knows of one job. It changes only through [`JobLife::apply`], with the
/// same [`Transition`] values the database is updated from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLife {
    /// State.
    pub state: JobState,
    /// The current attempt; 0 until first placed. It is the job's fencing epoch: reports about
    /// any other attempt are stale.
    pub attempt: u32,
    /// Its node, while placed.
    pub node: Option<String>,
    /// The GPUs it holds there.
    pub gpus: Vec<u32>,
    /// A gang's other nodes, with what it holds on each, while placed.
    pub others: Vec<labpool_scheduler::NodeShare>,
    /// The ports leased to it, while placed.
    pub ports: Option<labpool_scheduler::PortBlock>,
    /// Reason word.
    pub reason: Option<String>,
    /// Reason detail.
    pub reason_detail: Option<String>,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// Signal.
    pub signal: Option<i32>,
    /// Start of the current attempt, ms.
    pub start_time: Option<i64>,
    /// End, ms.
    pub end_time: Option<i64>,
    /// Who asked to cancel the running job, until it ends.
    pub cancel_requested_by: Option<String>,
    /// Standard output file.
    pub stdout: Option<PathBuf>,
    /// Standard error file.
    pub stderr: Option<PathBuf>,
    /// The isolation in force for its run, in words.
    pub isolation: Option<String>,
    /// False for `--no-requeue` jobs: they end NODE_FAIL with their node instead of waiting again.
    pub requeue: bool,
    /// Who holds it, while it is held (`--hold`, `labpool hold`).
    pub hold: Option<Hold>,
    /// Who asked for the running attempt to be requeued, until it is.
    pub requeue_requested_by: Option<String>,
    /// The notice that preempts the running attempt; kept after its requeue until the job is
    /// placed again, so that a restarted controller knows it gives way.
    pub preemption: Option<Preemption>,
    /// The end of a gang's part that stopped the running attempt, until the job ends with it.
    pub part_ended: Option<PartEnded>,
    /// The GPUs the running attempt gave back while suspended, and the time it spent so.
    pub pause: Option<GpuPause>,
}

/// The GPUs a running attempt gave back to the pool while its processes live on (an idle
/// session checkpointed to host memory), and the time it spent suspended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuPause {
    /// The GPUs it gave back, which are the ones it takes back.
    pub gpus: Vec<u32>,
    /// When it gave them back, while it is suspended; `None` once it holds them again.
    pub since: Option<i64>,
    /// Time it spent suspended before, ms: its charge leaves it out.
    pub paused_ms: i64,
}

impl GpuPause {
    /// True while the attempt is suspended.
    pub fn is_suspended(&self) -> bool {
        self.since.is_some()
    }

    /// The suspended job's reason, in words.
    pub fn words(&self) -> String {
        format!(
            "idle: its GPU state is saved in host memory and GPU {} went back to the pool; it is restored when its owner comes back and the GPU is free",
            crate::transition::gpu_list(&self.gpus)
        )
    }
}

/// A part of a gang that ended before the job did: the job ends as that part did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartEnded {
    /// Its node.
    pub node: String,
    /// How it ended.
    pub state: JobState,
    /// Why, as its node said.
    pub detail: Option<String>,
}

/// A notice to stop a running job so that another gets its GPUs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Preemption {
    /// The waiting job that takes its GPUs.
    pub by: u64,
    /// When the notice was given, ms.
    pub at: i64,
    /// Why it could be preempted, in words.
    pub cause: String,
}

/// A hold on a waiting job: who put it, and so who may release it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hold {
    /// The user who held it.
    pub by: String,
    /// Its owner's hold, or an admin's.
    pub kind: labpool_scheduler::HoldBy,
}

impl JobLife {
    /// A job just submitted: pending, never placed.
    pub fn pending(requeue: bool) -> JobLife {
        JobLife {
            state: JobState::Pending,
            attempt: 0,
            node: None,
            gpus: Vec::new(),
            others: Vec::new(),
            ports: None,
            reason: None,
            reason_detail: None,
            exit_code: None,
            signal: None,
            start_time: None,
            end_time: None,
            cancel_requested_by: None,
            stdout: None,
            stderr: None,
            isolation: None,
            requeue,
            hold: None,
            requeue_requested_by: None,
            preemption: None,
            part_ended: None,
            pause: None,
        }
    }

    /// True while `attempt` is this job's attempt on its node and the job is in `state`.
    pub fn is_current(&self, attempt: u32, state: JobState) -> bool {
        self.attempt == attempt && self.state == state
    }

    /// Every node it is placed on, the batch node first; none while it waits.
    pub fn nodes(&self) -> Vec<String> {
        self.node
            .iter()
            .cloned()
            .chain(self.others.iter().map(|s| s.node.clone()))
            .collect()
    }

    /// True when it is placed on `node`, as its batch node or one of its gang's.
    pub fn is_on(&self, node: &str) -> bool {
        self.node.as_deref() == Some(node) || self.others.iter().any(|s| s.node == node)
    }

    /// True while its running attempt is suspended (its GPUs given back).
    pub fn is_suspended(&self) -> bool {
        self.pause.as_ref().is_some_and(GpuPause::is_suspended)
    }

    /// True once it has ended.
    pub fn is_terminal(&self) -> bool {
        !matches!(
            self.state,
            JobState::Pending | JobState::Staging | JobState::Running
        )
    }

    /// Applies one change. The database applies the same value (see the controller's
    /// `jobs::store`), so the two agree by construction.
    pub fn apply(&mut self, t: &Transition) {
        match t {
            Transition::Staging {
                attempt,
                placement,
                kind,
                detail,
                ..
            } => {
                self.state = JobState::Staging;
                self.attempt = *attempt;
                self.place(placement);
                self.start_time = None;
                self.reason = Some(kind.reason().to_string());
                self.reason_detail = Some(detail.clone());
            }
            Transition::Started {
                attempt,
                placement,
                isolation,
                time,
            } => {
                self.state = JobState::Running;
                self.attempt = *attempt;
                self.place(placement);
                self.start_time = Some(*time);
                self.reason = None;
                self.reason_detail = None;
                self.isolation = Some(isolation.clone());
            }
            Transition::Waiting { code, detail } => {
                self.reason = Some(code.clone());
                self.reason_detail = Some(detail.clone());
            }
            Transition::Noted { .. } => {}
            Transition::RunningSince { time, .. } => self.start_time = Some(*time),
            Transition::Held { hold, .. } => self.hold = hold.clone(),
            Transition::CancelRequested { by, .. } => self.cancel_requested_by = Some(by.clone()),
            Transition::PartEnded { part, .. } => self.part_ended = Some(part.clone()),
            Transition::RequeueRequested { by, .. } => self.requeue_requested_by = Some(by.clone()),
            Transition::PreemptRequested { by, cause, time } => {
                self.requeue_requested_by = Some(preempt_requester(*by));
                self.preemption = Some(Preemption {
                    by: *by,
                    at: *time,
                    cause: cause.clone(),
                });
            }
            Transition::Requeued { code, detail, .. } => {
                self.requeue_requested_by = None;
                self.pause = None;
                self.state = JobState::Pending;
                self.node = None;
                self.gpus.clear();
                self.others.clear();
                self.ports = None;
                self.start_time = None;
                self.reason = Some(code.clone());
                self.reason_detail = Some(detail.clone());
            }
            Transition::Suspended { pause } => {
                self.gpus.clear();
                self.pause = Some(pause.clone());
                self.reason = Some(SUSPENDED.to_string());
                self.reason_detail = Some(pause.words());
            }
            Transition::Resumed { pause, .. } => {
                self.gpus = pause.gpus.clone();
                self.pause = Some(pause.clone());
                self.reason = None;
                self.reason_detail = None;
            }
            Transition::Ended {
                state,
                exit_code,
                signal,
                detail,
                time,
            } => {
                self.state = *state;
                self.exit_code = *exit_code;
                self.signal = *signal;
                self.end_time = Some(*time);
                self.reason = None;
                self.reason_detail = detail.clone();
            }
        }
    }

    fn place(&mut self, p: &crate::transition::Placement) {
        self.node = Some(p.node.clone());
        self.gpus = p.gpus.clone();
        self.others = p.others.clone();
        self.ports = p.ports;
        self.stdout = Some(p.stdout.clone());
        self.stderr = Some(p.stderr.clone());
        self.end_time = None;
        self.exit_code = None;
        self.signal = None;
        self.cancel_requested_by = None;
        self.requeue_requested_by = None;
        self.preemption = None;
        self.part_ended = None;
        self.pause = None;
    }
}

/// The reason word of a running job whose GPUs went back to the pool.
pub const SUSPENDED: &str = "Suspended";

/// Who a preemption's requeue is recorded as asked by.
pub fn preempt_requester(by: u64) -> String {
    format!("preemption for {}", preemptor(by))
}

/// What a job was preempted for, in words: `job 12`, or `a reservation` for job 0, which
/// stands for one.
pub fn preemptor(by: u64) -> String {
    if by == 0 {
        "a reservation".to_string()
    } else {
        format!("job {by}")
    }
}
