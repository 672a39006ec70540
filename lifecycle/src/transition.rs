//! One state change of one job, as a value. The shell applies the same value to its in-memory
//! record ([`crate::JobLife::apply`]) and to the database, so the two cannot drift.

use labpool_scheduler::JobState;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Why a placed job is not running yet: its datasets, or its environment, are being put on the
/// node. The word is the job's reason while it waits (`Staging`, `EnvStaging`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StageKind {
    /// Its datasets are copied into the node's cache.
    Data,
    /// Its software environment is unpacked on the node.
    Env,
}

impl StageKind {
    /// The job's reason word while it waits for this stage.
    pub fn reason(self) -> &'static str {
        match self {
            StageKind::Data => "Staging",
            StageKind::Env => "EnvStaging",
        }
    }
}

/// Where an attempt was placed: node, GPUs and output files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The node.
    pub node: String,
    /// The GPU indices it holds there.
    pub gpus: Vec<u32>,
    /// Standard output file.
    pub stdout: PathBuf,
    /// Standard error file.
    pub stderr: PathBuf,
    /// A gang's other nodes, with what it holds on each; empty for a job on one node. The
    /// batch script runs on `node`; the others run its `srun` steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<labpool_scheduler::NodeShare>,
    /// The TCP ports leased to it on its nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<labpool_scheduler::PortBlock>,
}

impl Placement {
    /// Every node it was placed on, the batch node first.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.node.as_str()).chain(self.others.iter().map(|s| s.node.as_str()))
    }
}

/// A job's state change. Each variant is one row update and, except [`Transition::Waiting`],
/// one line of the job's event log ([`Transition::event`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transition {
    /// Placed as attempt `attempt`; it waits for its datasets or environment (STAGING).
    Staging {
        /// The new attempt.
        attempt: u32,
        /// Where.
        placement: Placement,
        /// What it waits for.
        kind: StageKind,
        /// What is being staged, in words.
        detail: String,
        /// When, ms.
        time: i64,
    },
    /// Attempt `attempt` runs (RUNNING).
    Started {
        /// The attempt.
        attempt: u32,
        /// Where.
        placement: Placement,
        /// The isolation in force, in words.
        isolation: String,
        /// When, ms.
        time: i64,
    },
    /// Its reason changed (pending reason, staging progress, the wait for the environment).
    Waiting {
        /// The reason word.
        code: String,
        /// The reason in words.
        detail: String,
    },
    /// Something happened that changes no state but belongs in the job's log (a stage done).
    Noted {
        /// The event's name.
        event: String,
        /// In words.
        detail: String,
        /// When, ms.
        time: i64,
    },
    /// Held (`Some`) or released (`None`) while waiting.
    Held {
        /// The hold, or `None` for a release.
        hold: Option<crate::life::Hold>,
        /// Who released it, for a release.
        by: String,
        /// When, ms.
        time: i64,
    },
    /// Someone asked to requeue the running job (`labpool requeue`): once its attempt has
    /// stopped it waits again, as a new attempt; kept so that a restarted controller still does.
    RequeueRequested {
        /// Who.
        by: String,
        /// When, ms.
        time: i64,
    },
    /// The scheduler preempts the running job for job `by`: it gets its notice now, is stopped
    /// when the grace period ends, and waits again as a new attempt.
    PreemptRequested {
        /// The waiting job that takes its GPUs.
        by: u64,
        /// Why it could be preempted, in words.
        cause: String,
        /// When, ms.
        time: i64,
    },
    /// A part of a running gang ended on its own (its node's launcher was killed, ran out of
    /// memory, failed): the job is stopped on all of its nodes, and that part's end is what
    /// the job ends with. Kept so that a restarted controller still records it so.
    PartEnded {
        /// What ended first, and how.
        part: crate::life::PartEnded,
        /// When, ms.
        time: i64,
    },
    /// Someone asked to stop the running job; kept so that a restarted controller still stops it.
    CancelRequested {
        /// Who.
        by: String,
        /// When, ms.
        time: i64,
    },
    /// Back in the queue, keeping its place (PENDING with reason `code`).
    Requeued {
        /// The reason word.
        code: String,
        /// Why, in words.
        detail: String,
        /// When, ms.
        time: i64,
    },
    /// The running attempt's start, as its executor saw it (see [`crate::Event::RunningSince`]).
    RunningSince {
        /// The attempt.
        attempt: u32,
        /// When it began, ms.
        time: i64,
    },
    /// The running attempt's GPU state was checkpointed to host memory on its node, and its
    /// GPUs went back to the pool; its processes live on (an idle session).
    Suspended {
        /// The GPUs it gave back, since when, and its earlier suspended time.
        pause: crate::life::GpuPause,
    },
    /// A suspended attempt holds its GPUs again; its node restores its GPU state on them.
    Resumed {
        /// Its GPUs, and its suspended time now (`since` is `None`).
        pause: crate::life::GpuPause,
        /// When, ms.
        time: i64,
    },
    /// Ended in a terminal state.
    Ended {
        /// The terminal state.
        state: JobState,
        /// Its exit code, when it exited.
        exit_code: Option<i32>,
        /// The signal that ended it, when one did.
        signal: Option<i32>,
        /// Why, in words.
        detail: Option<String>,
        /// When, ms.
        time: i64,
    },
}

impl Transition {
    /// The line this change writes to the job's event log: (event, detail, time).
    pub fn event(&self) -> Option<(&str, String, i64)> {
        match self {
            Transition::Staging {
                attempt,
                placement,
                detail,
                time,
                ..
            } => Some((
                "staging",
                format!(
                    "attempt {attempt} on {}, GPUs [{}]: {detail}",
                    placement.node,
                    gpu_list(&placement.gpus)
                ),
                *time,
            )),
            Transition::Started {
                attempt,
                placement,
                time,
                ..
            } => Some((
                "start",
                format!(
                    "attempt {attempt} on {}, GPUs [{}]",
                    placement.node,
                    gpu_list(&placement.gpus)
                ),
                *time,
            )),
            Transition::Waiting { .. } => None,
            Transition::Noted {
                event,
                detail,
                time,
            } => Some((event, detail.clone(), *time)),
            Transition::Held { hold, by, time } => Some(match hold {
                Some(h) => ("hold", format!("held by {}", h.by), *time),
                None => ("release", format!("released by {by}"), *time),
            }),
            Transition::RequeueRequested { by, time } => {
                Some(("requeue", format!("requested by {by}"), *time))
            }
            Transition::PartEnded { part, time } => Some((
                "gang-part-ended",
                format!(
                    "its part on node {} ended ({}{}); the job is stopped on all of its nodes",
                    part.node,
                    part.state,
                    part.detail
                        .as_deref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                ),
                *time,
            )),
            Transition::CancelRequested { by, time } => {
                Some(("cancel", format!("requested by {by}"), *time))
            }
            Transition::PreemptRequested { by, cause, time } => Some((
                "preempt",
                format!(
                    "notice given: preempted for {} ({cause}); it stops when the grace period ends and is requeued",
                    crate::life::preemptor(*by)
                ),
                *time,
            )),
            Transition::Requeued { detail, time, .. } => Some(("requeue", detail.clone(), *time)),
            Transition::Suspended { pause } => Some((
                "suspend",
                format!(
                    "idle: its GPU state was checkpointed to host memory and GPU {} went back to the pool",
                    gpu_list(&pause.gpus)
                ),
                pause.since.unwrap_or_default(),
            )),
            Transition::Resumed { time, .. } => Some((
                "resume",
                "its owner came back and its GPU was free: it holds it again and its GPU state is restored".to_string(),
                *time,
            )),
            Transition::RunningSince { attempt, time } => Some((
                "running",
                format!("attempt {attempt} began to run in its executor"),
                *time,
            )),
            Transition::Ended {
                state,
                exit_code,
                signal,
                detail,
                time,
            } => {
                let what = match (exit_code, signal) {
                    (Some(c), _) => format!("{state}, exit code {c}"),
                    (None, Some(s)) => format!("{state}, signal {s}"),
                    _ => state.to_string(),
                };
                let text = match detail {
                    Some(d) => format!("{what}: {d}"),
                    None => what,
                };
                Some(("end", text, *time))
            }
        }
    }

    /// True when the job is finished after this change.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Transition::Ended { .. })
    }
}

/// GPU indices as the job record and its log write them: `0,1,3`.
pub fn gpu_list(gpus: &[u32]) -> String {
    gpus.iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
