//! The engine's orders in the core: starts (submitted held, released together), kills,
//! notices, signals, adoptions and lost nodes.

use super::{GateCore, GateEffect, SubmitFailure, Tracked, cancel};
use crate::api::SignalTarget;
use crate::api::agent::{AgentOrder, AgentReport};
use crate::slurm_gate::GateOrder;
use crate::slurm_gate::submit::Submission;
use labpool_lifecycle::Outcome;
use labpool_scheduler::JobState;

impl GateCore {
    /// A start: submitted held, unless the attempt is tracked already (never twice).
    pub(super) fn start(&mut self, s: Submission, out: &mut Vec<GateEffect>) {
        let key = (s.launch.job, s.launch.attempt);
        if !self.tracked.contains_key(&key) {
            out.push(GateEffect::Submit(Box::new(s)));
        }
    }

    /// sbatch answered for a start.
    pub(super) fn submitted(
        &mut self,
        key: (u64, u32),
        node: String,
        result: Result<u64, SubmitFailure>,
        now_ms: i64,
        out: &mut Vec<GateEffect>,
    ) {
        let (job, attempt) = key;
        match result {
            Ok(id) => {
                tracing::info!(job, attempt, slurm = id, node, "submitted to Slurm, held");
                self.tracked.insert(
                    key,
                    Tracked {
                        node,
                        slurm: Some(id),
                        released: Some(now_ms),
                        adopted: false,
                        stop_at: None,
                        started_ms: None,
                        kill: false,
                    },
                );
                self.held.push(id);
            }
            Err(e) if e.transient => {
                // slurmctld restarting or unreachable: placed again, not failed.
                tracing::warn!(job, attempt, "cannot submit to Slurm: {}", e.text);
                out.push(GateEffect::Report(AgentReport::NeverStarted {
                    node,
                    job,
                    attempt,
                    why: Some(format!(
                        "it could not be submitted to Slurm ({}); it waits to be placed again",
                        e.text
                    )),
                }));
            }
            Err(e) => {
                tracing::error!(job, attempt, "Slurm refused the job: {}", e.text);
                let outcome = Outcome::decided(
                    JobState::Failed,
                    now_ms,
                    format!("Slurm refused it: {}", e.text),
                );
                out.push(GateEffect::Report(AgentReport::Ended {
                    node,
                    job,
                    attempt,
                    outcome,
                    steps: Vec::new(),
                }));
            }
        }
    }

    /// Every order but a start.
    pub(super) fn order(&mut self, order: GateOrder, now_ms: i64, out: &mut Vec<GateEffect>) {
        match order {
            GateOrder::Start(s) => self.start(*s, out),
            GateOrder::Holdings(h) => self.holdings = h,
            GateOrder::NodeLost(node) => self.node_lost(&node, out),
            GateOrder::Agent { node, order } => self.agent_order(node, order, now_ms, out),
        }
    }

    /// The node's agent was lost and labpool placed its attempts again: their Slurm jobs go.
    fn node_lost(&mut self, node: &str, out: &mut Vec<GateEffect>) {
        let keys: Vec<(u64, u32)> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.node == node)
            .map(|(k, _)| *k)
            .collect();
        let mut ids = Vec::new();
        for key in keys {
            if let Some(t) = self.tracked.remove(&key) {
                tracing::warn!(
                    job = key.0,
                    attempt = key.1,
                    node,
                    "its node's agent was lost and the job placed again: cancelled in Slurm"
                );
                ids.extend(t.slurm);
            }
        }
        cancel(ids, out);
    }

    fn agent_order(
        &mut self,
        node: String,
        order: AgentOrder,
        now_ms: i64,
        out: &mut Vec<GateEffect>,
    ) {
        match order {
            AgentOrder::Kill { job, attempt } => {
                // Still tracked: its end (CANCELLED) is reported from the queue, as an agent
                // reports the end of a job it killed.
                if let Some(t) = self.tracked.get_mut(&(job, attempt)) {
                    t.kill = true;
                    cancel(t.slurm.into_iter().collect(), out);
                }
            }
            AgentOrder::Forget { job, attempt } => {
                self.tracked.remove(&(job, attempt));
            }
            AgentOrder::Notice {
                job,
                attempt,
                signal,
                grace_ms,
                ..
            } => {
                let Some(t) = self.tracked.get_mut(&(job, attempt)) else {
                    return;
                };
                t.stop_at = Some(now_ms.saturating_add(grace_ms as i64));
                if let Some(slurm) = t.slurm {
                    let (signal, which) = match signal {
                        Some(s) if s.batch_only => (s.signal, Some("--batch")),
                        Some(s) => (s.signal, None),
                        None => (15, Some("--full")),
                    };
                    out.push(GateEffect::Signal {
                        slurm,
                        signal,
                        which,
                    });
                }
            }
            AgentOrder::Signal {
                job,
                attempt,
                signal,
                target,
            } => {
                let Some(slurm) = self.tracked.get(&(job, attempt)).and_then(|t| t.slurm) else {
                    return;
                };
                let which = match target {
                    SignalTarget::Steps => None,
                    SignalTarget::Batch => Some("--batch"),
                    SignalTarget::All => Some("--full"),
                };
                out.push(GateEffect::Signal {
                    slurm,
                    signal,
                    which,
                });
            }
            AgentOrder::Adopt { expected } => {
                self.adopted.insert(node.clone());
                // What the gate tracks there that labpool no longer expects was placed again
                // (its node was lost): it must not run twice.
                let stale: Vec<(u64, u32)> = self
                    .tracked
                    .iter()
                    .filter(|(k, t)| t.node == node && !expected.contains(k))
                    .map(|(k, _)| *k)
                    .collect();
                let mut ids = Vec::new();
                for key in stale {
                    ids.extend(self.tracked.remove(&key).and_then(|t| t.slurm));
                }
                cancel(ids, out);
                for key in expected {
                    self.tracked.entry(key).or_insert_with(|| Tracked {
                        node: node.clone(),
                        slurm: None,
                        released: None,
                        adopted: true,
                        stop_at: None,
                        started_ms: None,
                        kill: false,
                    });
                }
                // Answered from the queue, at once.
                out.push(GateEffect::Observe);
            }
            other => tracing::debug!(node, "not a Slurm order: {other:?}"),
        }
    }
}
