//! The lifecycle's rules, one function per event, each over one job's record. They decide; they
//! change nothing. [`crate::Lifecycle`] and the controller both call them and apply what they
//! return, so the simulator and the daemon follow the same rules.

use crate::life::JobLife;
use crate::transition::{Placement, StageKind, Transition};
use labpool_scheduler::JobState;
use serde::{Deserialize, Serialize};

/// How an attempt ended, as its shim recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Final state.
    pub state: JobState,
    /// Exit code, when the script exited.
    pub exit_code: Option<i32>,
    /// Signal, when one ended it.
    pub signal: Option<i32>,
    /// When it ended, ms since the epoch.
    pub end_time_ms: i64,
    /// Why, in words, when there is more to say than the state.
    pub reason: Option<String>,
}

impl Outcome {
    /// An end the controller decides (no exit code, no signal), at `time`, for `why`.
    pub fn decided(state: JobState, time: i64, why: String) -> Outcome {
        Outcome {
            state,
            exit_code: None,
            signal: None,
            end_time_ms: time,
            reason: Some(why),
        }
    }
}

/// What placing a job's next attempt needs before it can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Everything is on the node: it starts now, with this isolation (in words).
    Ready {
        /// The isolation in force, in words.
        isolation: String,
    },
    /// It waits for a stage, described in words.
    Stage(StageKind, String),
}

/// What a placed attempt still lacks on its node, as the shell finds it; [`Readiness::next`]
/// decides what it waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lacks {
    /// Dataset versions not complete on the node, in words (`None`: all there).
    pub data: Option<String>,
    /// The environment to put on the node, in words (`None`: none needed, or in place).
    pub env: Option<String>,
    /// The isolation it would start with, in words.
    pub isolation: String,
}

impl Readiness {
    /// What a placed attempt waits for next: its datasets, then its environment (the node
    /// stages them in that order, one after the other); with nothing lacking it starts.
    pub fn next(lacks: Lacks) -> Readiness {
        match lacks {
            Lacks {
                data: Some(detail), ..
            } => Readiness::Stage(StageKind::Data, detail),
            Lacks {
                env: Some(detail), ..
            } => Readiness::Stage(StageKind::Env, detail),
            Lacks { isolation, .. } => Readiness::Ready { isolation },
        }
    }

    /// The stage it waits for, if any.
    pub fn stage_kind(&self) -> Option<StageKind> {
        match self {
            Readiness::Ready { .. } => None,
            Readiness::Stage(kind, _) => Some(*kind),
        }
    }
}

/// Placing the job's next attempt at `time`: staging, or started.
pub fn place(life: &JobLife, placement: Placement, ready: Readiness, time: i64) -> Transition {
    let attempt = life.attempt + 1;
    match ready {
        Readiness::Ready { isolation } => Transition::Started {
            attempt,
            placement,
            isolation,
            time,
        },
        Readiness::Stage(kind, detail) => Transition::Staging {
            attempt,
            placement,
            kind,
            detail,
            time,
        },
    }
}

/// A STAGING attempt whose last stage finished: it waits for the next one, or starts.
pub fn staged(life: &JobLife, next: Readiness, time: i64) -> Transition {
    match next {
        Readiness::Stage(kind, detail) => Transition::Waiting {
            code: kind.reason().to_string(),
            detail,
        },
        Readiness::Ready { isolation } => Transition::Started {
            attempt: life.attempt,
            placement: Placement {
                node: life.node.clone().unwrap_or_default(),
                gpus: life.gpus.clone(),
                stdout: life.stdout.clone().unwrap_or_default(),
                stderr: life.stderr.clone().unwrap_or_default(),
                others: life.others.clone(),
                ports: life.ports,
            },
            isolation,
            time,
        },
    }
}

/// A stage of a STAGING attempt failed: the job ends FAILED, uncharged (it never ran).
pub fn stage_failed(why: String, time: i64) -> Transition {
    ended(Outcome::decided(JobState::Failed, time, why), None)
}

/// The end a shim reported, or a decided end, as a transition. A cancelled job's detail names
/// who cancelled it.
pub fn ended(outcome: Outcome, cancelled_by: Option<&str>) -> Transition {
    let detail = match (outcome.state, cancelled_by) {
        (JobState::Cancelled, Some(by)) => Some(format!("cancelled by {by}")),
        _ => outcome.reason,
    };
    Transition::Ended {
        state: outcome.state,
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        detail,
        time: outcome.end_time_ms,
    }
}

/// Why a report about an attempt is not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// The job is not known, or already ended.
    Unknown,
    /// The report names another attempt than the job's current one, or the attempt is not in
    /// the state the report needs: it was fenced (requeued, ended) meanwhile.
    Fenced {
        /// The job's current attempt.
        current: u32,
    },
    /// The attempt is current, but another node than the one reporting runs it: a node may
    /// speak only for the attempts it runs.
    OtherNode {
        /// The node the attempt runs on.
        runs_on: String,
    },
}

impl Stale {
    /// In words, for the log.
    pub fn describe(&self) -> String {
        match self {
            Stale::Unknown => "the job is not active".to_string(),
            Stale::Fenced { current } => {
                format!("not the current attempt (the job is at attempt {current})")
            }
            Stale::OtherNode { runs_on } => format!(
                "the attempt runs on node {runs_on}, not on the node that reported it; refused"
            ),
        }
    }
}

/// The running attempt a report from `node` may speak for: the job's current one, running on
/// that very node.
fn reported_by_its_node<'a>(
    life: Option<&'a JobLife>,
    node: &str,
    attempt: u32,
) -> Result<&'a JobLife, Stale> {
    let life = life.ok_or(Stale::Unknown)?;
    if !life.is_current(attempt, JobState::Running) {
        return Err(Stale::Fenced {
            current: life.attempt,
        });
    }
    match life.node.as_deref() {
        Some(runs_on) if runs_on != node => Err(Stale::OtherNode {
            runs_on: runs_on.to_string(),
        }),
        _ => Ok(life),
    }
}

/// `node` reported when `attempt` began to run: its start, if it is the current running attempt
/// on that node and the time differs from the one recorded.
pub fn report_running_since(
    life: Option<&JobLife>,
    node: &str,
    attempt: u32,
    time: i64,
) -> Result<Option<Transition>, Stale> {
    let life = reported_by_its_node(life, node, attempt)?;
    Ok((life.start_time != Some(time)).then_some(Transition::RunningSince { attempt, time }))
}

/// `node` reported that `attempt` ended with `outcome`: its end, if it is the current running
/// attempt and runs on that node.
pub fn report_ended(
    life: Option<&JobLife>,
    node: &str,
    attempt: u32,
    outcome: Outcome,
) -> Result<Transition, Stale> {
    let life = reported_by_its_node(life, node, attempt)?;
    // A requeue asked for waits again, whatever the attempt's end; a cancel wins over it.
    if let (Some(p), None) = (&life.preemption, &life.cancel_requested_by) {
        return Ok(Transition::Requeued {
            code: "Preempted".into(),
            detail: format!(
                "preempted for {} ({})",
                crate::life::preemptor(p.by),
                p.cause
            ),
            time: outcome.end_time_ms,
        });
    }
    if let (Some(by), None) = (&life.requeue_requested_by, &life.cancel_requested_by) {
        return Ok(Transition::Requeued {
            code: "Requeued".into(),
            detail: format!("requeued by {by}"),
            time: outcome.end_time_ms,
        });
    }
    // A gang's part ended first and the rest was stopped for it: the job ends as that part
    // did (its node's launcher killed for memory is OUT_OF_MEMORY, not a cancel).
    if let (Some(p), None) = (&life.part_ended, &life.cancel_requested_by)
        && p.state != JobState::Completed
    {
        return Ok(Transition::Ended {
            state: p.state,
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            detail: Some(format!(
                "its part on node {} ended first ({}{}); the job was stopped on all of its nodes",
                p.node,
                p.state,
                p.detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            )),
            time: outcome.end_time_ms,
        });
    }
    // An attempt lost with its node (NODE_FAIL, as Slurm reports it) follows the node-down
    // rules: requeued, unless it asked for --no-requeue.
    if outcome.state == JobState::NodeFail
        && let Some(t) = node_down(
            life,
            node,
            outcome.reason.as_deref().unwrap_or("lost with its node"),
            outcome.end_time_ms,
        )
    {
        return Ok(t);
    }
    Ok(ended(outcome, life.cancel_requested_by.as_deref()))
}

/// A node reported that `attempt` never started (its start order was lost with a restart, or
/// `why`): it waits again, or ends CANCELLED when a cancel was asked for meanwhile.
pub fn report_never_started(
    life: Option<&JobLife>,
    node: &str,
    attempt: u32,
    time: i64,
    why: Option<String>,
) -> Result<Transition, Stale> {
    let life = reported_by_its_node(life, node, attempt)?;
    Ok(match &life.cancel_requested_by {
        Some(by) => ended(
            Outcome::decided(JobState::Cancelled, time, format!("cancelled by {by}")),
            Some(by),
        ),
        None => Transition::Requeued {
            code: "Requeued".into(),
            detail: why.unwrap_or_else(|| "the start order was lost (the controller or the node's agent restarted) before the job started; it waits again".into()),
            time,
        },
    })
}

/// What a cancel does to a job, by its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelPlan {
    /// It ends now (pending or staging: nothing runs yet, nothing is charged).
    EndNow {
        /// The end.
        end: Transition,
        /// It was pending (leaves the queue) rather than staging (its stage is let go).
        was_pending: bool,
    },
    /// It runs: the request is recorded, then the node is told to kill the attempt.
    Kill {
        /// The record of the request.
        request: Transition,
        /// Where.
        node: String,
        /// Which attempt.
        attempt: u32,
    },
}

/// `by` cancels the job at `time`.
pub fn cancel(life: &JobLife, by: &str, time: i64) -> CancelPlan {
    match life.state {
        JobState::Pending | JobState::Staging => {
            let was_pending = life.state == JobState::Pending;
            let how = if was_pending { "pending" } else { "staging" };
            CancelPlan::EndNow {
                end: Transition::Ended {
                    state: JobState::Cancelled,
                    exit_code: None,
                    signal: None,
                    detail: Some(format!("cancelled by {by} while {how}")),
                    time,
                },
                was_pending,
            }
        }
        _ => CancelPlan::Kill {
            request: Transition::CancelRequested {
                by: by.to_string(),
                time,
            },
            node: life.node.clone().unwrap_or_default(),
            attempt: life.attempt,
        },
    }
}

/// The job's node went DOWN for `reason` at `time`: a staging job waits again; a running one
/// is requeued (its attempt fenced), ends CANCELLED when a cancel was pending, or ends
/// NODE_FAIL when it may not be requeued. `None` for a job not placed there.
pub fn node_down(life: &JobLife, node: &str, reason: &str, time: i64) -> Option<Transition> {
    if !life.is_on(node) || life.state == JobState::Pending || life.is_terminal() {
        return None;
    }
    // A gang loses all of its nodes with one: it is never left running on a part.
    let reason = &if life.others.is_empty() {
        reason.to_string()
    } else {
        format!(
            "{reason}; it is one of the job's {} nodes, so the job stops on all of them",
            life.others.len() + 1
        )
    };
    let requeue = |detail: String| Transition::Requeued {
        code: "NodeFail".into(),
        detail,
        time,
    };
    let end = |state: JobState, why: String| ended(Outcome::decided(state, time, why), None);
    Some(match life.state {
        JobState::Staging => requeue(format!(
            "node {node} went DOWN while the job was staged there ({reason}); it waits again"
        )),
        _ if life.cancel_requested_by.is_some() => end(
            JobState::Cancelled,
            format!("cancelled; its node {node} went DOWN ({reason})"),
        ),
        _ if !life.requeue => end(
            JobState::NodeFail,
            format!(
                "node {node} went DOWN while the job ran ({reason}); not requeued (--no-requeue)"
            ),
        ),
        _ => requeue(format!(
            "node {node} went DOWN while attempt {} ran ({reason}); requeued, and killed there if the node comes back",
            life.attempt
        )),
    })
}

/// What a restarted controller does with a job it reloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// It waits in the queue again.
    Queue,
    /// Its stage resumes: it holds its GPUs, and no shim runs yet.
    ResumeStage,
    /// It runs on its node, which is asked to re-adopt this attempt (and kill any other). A
    /// cancel asked for before the restart is sent again.
    Adopt {
        /// Where.
        node: String,
        /// Which attempt.
        attempt: u32,
        /// A cancel or requeue asked for before the restart.
        kill: bool,
    },
}

/// After a restart: how the reloaded job goes on.
pub fn recover(life: &JobLife) -> Recovery {
    match life.state {
        JobState::Pending => Recovery::Queue,
        JobState::Staging => Recovery::ResumeStage,
        _ => Recovery::Adopt {
            node: life.node.clone().unwrap_or_default(),
            attempt: life.attempt,
            kill: life.cancel_requested_by.is_some() || life.requeue_requested_by.is_some(),
        },
    }
}
