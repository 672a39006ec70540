//! The lifecycle state machine: jobs and nodes; [`Event`]s and `now` in, [`Effect`]s out.

use crate::event::{Effect, Event};
use crate::life::JobLife;
use crate::rules::{self, CancelPlan, Recovery, Stale};
use crate::transition::{StageKind, Transition};
use labpool_scheduler::JobState;
use std::collections::BTreeMap;

/// A job record the lifecycle can track: the shell's own row, holding a [`JobLife`].
pub trait Tracked {
    /// Its lifecycle part.
    fn life(&self) -> &JobLife;
    /// Its lifecycle part, to apply a transition to.
    fn life_mut(&mut self) -> &mut JobLife;
}

impl Tracked for JobLife {
    fn life(&self) -> &JobLife {
        self
    }
    fn life_mut(&mut self) -> &mut JobLife {
        self
    }
}

/// Every unfinished job, by id, and the nodes' state. Iteration is by id and by name, so the
/// same events give the same effects, in the same order, every time.
#[derive(Debug, Clone)]
pub struct Lifecycle<J: Tracked = JobLife> {
    jobs: BTreeMap<u64, J>,
    down: BTreeMap<String, String>,
}

impl<J: Tracked> Default for Lifecycle<J> {
    fn default() -> Self {
        Lifecycle {
            jobs: BTreeMap::new(),
            down: BTreeMap::new(),
        }
    }
}

impl<J: Tracked> Lifecycle<J> {
    /// An empty lifecycle.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tracks a job: just submitted, or reloaded after a restart.
    pub fn admit(&mut self, id: u64, job: J) {
        self.jobs.insert(id, job);
    }

    /// Stops tracking a job (after its [`Effect::Release`] or [`Effect::Dequeue`]), returning it.
    pub fn remove(&mut self, id: u64) -> Option<J> {
        self.jobs.remove(&id)
    }

    /// A job's record.
    pub fn job(&self, id: u64) -> Option<&J> {
        self.jobs.get(&id)
    }

    /// Changes the shell's own data of a tracked job (its spec, its request); its lifecycle
    /// fields change only through transitions.
    pub fn update_record(&mut self, id: u64, f: impl FnOnce(&mut J)) -> bool {
        match self.jobs.get_mut(&id) {
            Some(j) => {
                let life = j.life().clone();
                f(j);
                debug_assert!(*j.life() == life, "a record update changed the lifecycle");
                *j.life_mut() = life;
                true
            }
            None => false,
        }
    }

    /// True when the job is tracked.
    pub fn contains(&self, id: u64) -> bool {
        self.jobs.contains_key(&id)
    }

    /// Every tracked job, by id.
    pub fn jobs(&self) -> impl Iterator<Item = (&u64, &J)> {
        self.jobs.iter()
    }

    /// Number of tracked jobs.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when no job is tracked.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Why a node is DOWN, if it is.
    pub fn node_down_reason(&self, node: &str) -> Option<&str> {
        self.down.get(node).map(String::as_str)
    }

    /// The attempts a node must be running: the fence it is given when it (re)joins.
    pub fn expected_on(&self, node: &str) -> Vec<(u64, u32)> {
        self.jobs
            .iter()
            .map(|(id, j)| (*id, j.life()))
            .filter(|(_, l)| l.state == JobState::Running && l.is_on(node))
            .map(|(id, l)| (id, l.attempt))
            .collect()
    }

    /// Handles one event at `now` (ms): its transitions are applied here and returned as
    /// [`Effect::Persist`], followed by what the shell must do.
    pub fn handle(&mut self, event: Event, now: i64) -> Vec<Effect> {
        let mut out = Vec::new();
        match event {
            Event::Placed {
                job,
                placement,
                ready,
            } => {
                let Some(life) = self.pending(job) else {
                    return out;
                };
                let waits_for = ready.stage_kind();
                let t = rules::place(life, placement, ready, now);
                self.commit(job, t, &mut out);
                self.start_or_stage(job, waits_for, false, &mut out);
            }
            Event::Waiting { job, code, detail } => {
                if let Some(life) = self.pending(job)
                    && (life.reason.as_deref() != Some(&code)
                        || life.reason_detail.as_deref() != Some(&detail))
                {
                    self.commit(job, Transition::Waiting { code, detail }, &mut out);
                }
            }
            Event::StageProgress {
                job,
                attempt,
                detail,
            } => {
                if self.staging(job, attempt).is_some() {
                    let code = StageKind::Data.reason().to_string();
                    self.commit(job, Transition::Waiting { code, detail }, &mut out);
                }
            }
            Event::Staged {
                job,
                attempt,
                notes,
                next,
            } => {
                let Some(life) = self.staging(job, attempt) else {
                    return out;
                };
                let waits_for = next.stage_kind();
                let t = rules::staged(life, next, now);
                for detail in notes {
                    let event = "staged".to_string();
                    let note = Transition::Noted {
                        event,
                        detail,
                        time: now,
                    };
                    self.commit(job, note, &mut out);
                }
                self.commit(job, t, &mut out);
                self.start_or_stage(job, waits_for, true, &mut out);
            }
            Event::StagedIn { job, notes } => {
                if self.pending(job).is_none() {
                    return out;
                }
                for detail in notes {
                    let note = Transition::Noted {
                        event: "staged".to_string(),
                        detail,
                        time: now,
                    };
                    self.commit(job, note, &mut out);
                }
            }
            Event::StageFailed {
                job,
                attempt,
                why,
                retry,
            } => {
                if self.staging(job, attempt).is_none() {
                    return out;
                }
                match retry {
                    Some(code) => {
                        let t = Transition::Requeued {
                            code,
                            detail: why,
                            time: now,
                        };
                        self.commit(job, t, &mut out);
                        out.push(Effect::Requeue {
                            job,
                            charged: false,
                        });
                    }
                    None => {
                        self.commit(job, rules::stage_failed(why, now), &mut out);
                        out.push(Effect::Release {
                            job,
                            was_staging: true,
                        });
                    }
                }
            }
            Event::Ended {
                node,
                job,
                attempt,
                outcome,
            } => {
                if let Some(life) = self
                    .life(job)
                    .filter(|l| l.is_current(attempt, JobState::Running))
                    .filter(|l| l.node.as_deref() != Some(&node) && l.is_on(&node))
                {
                    // A part of a gang ended on its own: its batch node is stopped, and that
                    // end (reported as any end is) stops the gang's other parts.
                    let head = life.node.clone().unwrap_or_default();
                    let note = Transition::PartEnded {
                        part: crate::life::PartEnded {
                            node: node.clone(),
                            state: outcome.state,
                            detail: outcome.reason.clone(),
                        },
                        time: now,
                    };
                    self.commit(job, note, &mut out);
                    out.push(Effect::Kill {
                        job,
                        attempt,
                        node: head,
                    });
                    out.push(Effect::Forget { job, attempt, node });
                    return out;
                }
                let parts = self
                    .life(job)
                    .map(|l| kill_parts(l, job, &node))
                    .unwrap_or_default();
                match rules::report_ended(self.life(job), &node, attempt, outcome) {
                    Ok(t) => {
                        // A report's end that waits again is a requeue asked for: it ran.
                        let charged = matches!(t, Transition::Requeued { .. });
                        self.end_or_requeue(job, t, charged, &mut out);
                        // The batch script ended: the gang's other nodes stop its steps.
                        out.extend(parts);
                    }
                    Err(why) => out.push(Effect::Ignored {
                        job,
                        attempt,
                        node: node.clone(),
                        why,
                    }),
                }
                out.push(Effect::Forget { job, attempt, node });
            }
            Event::RunningSince {
                node,
                job,
                attempt,
                time,
            } => match rules::report_running_since(self.life(job), &node, attempt, time) {
                Ok(Some(t)) => self.commit(job, t, &mut out),
                Ok(None) => {}
                Err(why) => out.push(Effect::Ignored {
                    job,
                    attempt,
                    node,
                    why,
                }),
            },
            Event::NeverStarted {
                node,
                job,
                attempt,
                why: cause,
            } => {
                match rules::report_never_started(self.life(job), &node, attempt, now, cause) {
                    Ok(t) => self.end_or_requeue(job, t, false, &mut out),
                    Err(why @ Stale::OtherNode { .. }) => out.push(Effect::Ignored {
                        job,
                        attempt,
                        node,
                        why,
                    }),
                    // A late report about a fenced attempt: nothing to say.
                    Err(_) => {}
                }
            }
            Event::Cancel { job, by } => {
                let Some(life) = self.life(job).filter(|l| !l.is_terminal()) else {
                    return out;
                };
                match rules::cancel(life, &by, now) {
                    CancelPlan::EndNow { end, was_pending } => {
                        self.commit(job, end, &mut out);
                        out.push(if was_pending {
                            Effect::Dequeue { job }
                        } else {
                            Effect::Release {
                                job,
                                was_staging: true,
                            }
                        });
                    }
                    CancelPlan::Kill {
                        request,
                        node,
                        attempt,
                    } => {
                        let parts = kill_parts(life, job, &node);
                        self.commit(job, request, &mut out);
                        out.push(Effect::Kill { job, attempt, node });
                        out.extend(parts);
                    }
                }
            }
            Event::Expire { job, detail } => {
                if self.pending(job).is_none() {
                    return out;
                }
                let t = Transition::Ended {
                    state: JobState::Deadline,
                    exit_code: None,
                    signal: None,
                    detail: Some(detail),
                    time: now,
                };
                self.commit(job, t, &mut out);
                out.push(Effect::Dequeue { job });
            }
            Event::Requeue { job, by } => {
                // Only a running attempt that no cancel is stopping; the shell says why not.
                let Some(life) = self.stoppable(job) else {
                    return out;
                };
                let (node, attempt) = (life.node.clone().unwrap_or_default(), life.attempt);
                let parts = kill_parts(life, job, &node);
                let t = Transition::RequeueRequested { by, time: now };
                self.commit(job, t, &mut out);
                out.push(Effect::Kill { job, attempt, node });
                out.extend(parts);
            }
            Event::Preempt { job, by, cause } => {
                // Only a running attempt that nobody is stopping already.
                let Some(life) = self.stoppable(job) else {
                    return out;
                };
                let attempt = life.attempt;
                let nodes = life.nodes();
                let t = Transition::PreemptRequested {
                    by,
                    cause,
                    time: now,
                };
                self.commit(job, t, &mut out);
                out.extend(nodes.into_iter().map(|node| Effect::Notice {
                    job,
                    attempt,
                    node,
                    by,
                }));
            }
            Event::Hold { job, hold, by } => {
                let Some(life) = self.pending(job) else {
                    return out;
                };
                if life.hold == hold {
                    return out;
                }
                let kind = hold.as_ref().map(|h| h.kind);
                let t = Transition::Held {
                    hold,
                    by,
                    time: now,
                };
                self.commit(job, t, &mut out);
                out.push(Effect::HoldChanged { job, hold: kind });
            }
            Event::NodeDown { node, reason } => {
                let changes: Vec<(u64, Transition, Vec<Effect>)> = self
                    .jobs
                    .iter()
                    .filter_map(|(id, j)| {
                        let t = rules::node_down(j.life(), &node, &reason, now)?;
                        // A gang's running parts on its nodes still up are stopped; the part
                        // on the lost node is killed when it rejoins (the fence).
                        let parts = match j.life().state {
                            JobState::Running => kill_parts(j.life(), *id, &node),
                            _ => Vec::new(),
                        };
                        Some((*id, t, parts))
                    })
                    .collect();
                self.down.insert(node, reason);
                for (job, t, parts) in changes {
                    self.end_or_requeue(job, t, false, &mut out);
                    out.extend(parts);
                }
            }
            Event::NodeUp { node } => {
                self.down.remove(&node);
                out = self.recover([node.as_str()]);
            }
            Event::Suspended { node, job, attempt } => {
                self.suspended(&node, job, attempt, now, &mut out)
            }
            Event::Resume { job } => self.resume(job, now, &mut out),
            Event::Unrestorable { job, why } => {
                let Some(life) = self
                    .life(job)
                    .filter(|l| matches!(l.state, JobState::Staging | JobState::Running))
                else {
                    return out;
                };
                let was_staging = life.state == JobState::Staging;
                let t = Transition::Ended {
                    state: JobState::NodeFail,
                    exit_code: None,
                    signal: None,
                    detail: Some(why),
                    time: now,
                };
                self.commit(job, t, &mut out);
                out.push(Effect::Release { job, was_staging });
            }
        }
        out
    }

    /// After a restart, once every job is admitted again, or when a node rejoins: the fence for
    /// each of `nodes`, then the kills of their running jobs whose cancel was asked for (the
    /// first kill may have been lost with the controller or the link).
    pub fn recover<'a>(&self, nodes: impl IntoIterator<Item = &'a str>) -> Vec<Effect> {
        let mut out: Vec<Effect> = nodes
            .into_iter()
            .map(|node| Effect::Adopt {
                node: node.to_string(),
                expected: self.expected_on(node),
            })
            .collect();
        let adopting: Vec<String> = out
            .iter()
            .filter_map(|e| match e {
                Effect::Adopt { node, .. } => Some(node.clone()),
                _ => None,
            })
            .collect();
        for (id, j) in &self.jobs {
            if let Recovery::Adopt {
                attempt,
                kill: true,
                ..
            } = rules::recover(j.life())
                && j.life().state == JobState::Running
            {
                for node in j.life().nodes() {
                    if adopting.contains(&node) {
                        out.push(Effect::Kill {
                            job: *id,
                            attempt,
                            node,
                        });
                    }
                }
            }
        }
        out
    }

    pub(crate) fn life(&self, job: u64) -> Option<&JobLife> {
        self.jobs.get(&job).map(Tracked::life)
    }

    /// A running attempt that no cancel, requeue or preemption is stopping yet.
    pub(crate) fn stoppable(&self, job: u64) -> Option<&JobLife> {
        self.life(job).filter(|l| {
            l.state == JobState::Running
                && l.cancel_requested_by.is_none()
                && l.requeue_requested_by.is_none()
        })
    }

    fn pending(&self, job: u64) -> Option<&JobLife> {
        self.life(job).filter(|l| l.state == JobState::Pending)
    }

    fn staging(&self, job: u64, attempt: u32) -> Option<&JobLife> {
        self.life(job)
            .filter(|l| l.is_current(attempt, JobState::Staging))
    }

    pub(crate) fn commit(&mut self, job: u64, transition: Transition, out: &mut Vec<Effect>) {
        if let Some(j) = self.jobs.get_mut(&job) {
            j.life_mut().apply(&transition);
            out.push(Effect::Persist { job, transition });
        }
    }

    /// After a placement or a stage: the attempt's next stage, or its launch when it waits for
    /// nothing (`staged` when it waited for a stage first).
    fn start_or_stage(
        &self,
        job: u64,
        waits_for: Option<StageKind>,
        staged: bool,
        out: &mut Vec<Effect>,
    ) {
        let Some(l) = self.life(job) else { return };
        let (node, attempt) = (l.node.clone().unwrap_or_default(), l.attempt);
        out.push(match waits_for {
            Some(kind) => Effect::Stage {
                job,
                attempt,
                node,
                kind,
            },
            None => Effect::Launch {
                job,
                attempt,
                node,
                staged,
            },
        });
    }

    fn end_or_requeue(&mut self, job: u64, t: Transition, charged: bool, out: &mut Vec<Effect>) {
        let terminal = t.is_terminal();
        self.commit(job, t, out);
        out.push(if terminal {
            Effect::Release {
                job,
                was_staging: false,
            }
        } else {
            Effect::Requeue { job, charged }
        });
    }
}

/// The kills of a gang's running attempt on each of its nodes but `except`: a gang stops on
/// all of its nodes together. None for a job on one node.
fn kill_parts(life: &JobLife, job: u64, except: &str) -> Vec<Effect> {
    life.nodes()
        .into_iter()
        .filter(|n| n != except)
        .map(|node| Effect::Kill {
            job,
            attempt: life.attempt,
            node,
        })
        .collect()
}
