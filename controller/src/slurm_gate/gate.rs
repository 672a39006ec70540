//! The gate's task: the shell around [`GateCore`]. It takes the orders the engine would send
//! agents about running attempts, reads Slurm's queue and nodes every `[executor] poll`, hands
//! both to the core with the time, and carries out what the core decides: Slurm commands run,
//! reports and views sent to the engine. It decides nothing itself.

use crate::api::agent::{AgentOrder, AgentReport};
use crate::engine::Request;
use crate::slurm_gate::command::{Slurm, SlurmError};
use crate::slurm_gate::core::{GateCore, GateEffect, GateEvent, SubmitFailure};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tokio::sync::mpsc;

/// What the engine sends the gate.
#[derive(Debug)]
pub enum GateOrder {
    /// Submit this attempt held, pinned and tagged, then release it.
    Start(Box<crate::slurm_gate::submit::Submission>),
    /// The datasets each node holds complete in their current versions (mirrored as features).
    Holdings(BTreeMap<String, Vec<String>>),
    /// The node's agent was lost and labpool has requeued what ran there: its Slurm jobs are
    /// cancelled, so that no attempt runs twice.
    NodeLost(String),
    /// An agent order about running attempts (kill, notice, signal, adopt, forget) for `node`.
    Agent {
        /// The node it was for.
        node: String,
        /// The order.
        order: AgentOrder,
    },
}

/// The gate: the core, and what it talks through.
pub struct Gate {
    slurm: Slurm,
    as_root: bool,
    core: GateCore,
    pool: String,
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    reports: mpsc::UnboundedSender<AgentReport>,
    engine: mpsc::Sender<Request>,
}

impl Gate {
    /// A gate over `slurm`, reading the time from `clock`.
    pub fn new(
        slurm: Slurm,
        pool: String,
        start_timeout: Duration,
        clock: std::sync::Arc<dyn crate::clock::Clock>,
        reports: mpsc::UnboundedSender<AgentReport>,
        engine: mpsc::Sender<Request>,
    ) -> Gate {
        Gate {
            slurm,
            as_root: nix::unistd::geteuid().is_root(),
            core: GateCore::new(pool.clone(), start_timeout.as_millis() as i64),
            pool,
            clock,
            reports,
            engine,
        }
    }

    /// Serves orders and polls Slurm until the engine drops its sender.
    pub async fn run(mut self, mut orders: mpsc::UnboundedReceiver<GateOrder>, poll: Duration) {
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                o = orders.recv() => {
                    let Some(first) = o else { return };
                    let mut batch = vec![first];
                    while let Ok(o) = orders.try_recv() {
                        batch.push(o);
                    }
                    for order in batch {
                        self.handle(GateEvent::Order(order)).await;
                    }
                    self.handle(GateEvent::BatchDone).await;
                }
                _ = tick.tick() => self.observe().await,
            }
        }
    }

    /// Hands `event` to the core and carries out its effects, and those of the events they
    /// lead to, in order.
    async fn handle(&mut self, event: GateEvent) {
        let mut effects: VecDeque<GateEffect> = self.core.handle(event, self.clock.now_ms()).into();
        while let Some(effect) = effects.pop_front() {
            let next = match effect {
                GateEffect::Submit(s) => {
                    let key = (s.launch.job, s.launch.attempt);
                    let result = self
                        .slurm
                        .submit_held(&s, self.as_root, &self.pool)
                        .await
                        .map_err(|e| failure(&e));
                    Some(GateEvent::Submitted {
                        key,
                        node: s.node.clone(),
                        result,
                    })
                }
                GateEffect::Release(ids) => {
                    // Left held on failure: the next poll sees it pending past the start
                    // timeout and it is placed again.
                    if let Err(e) = self.slurm.release(&ids).await {
                        tracing::error!("cannot release Slurm jobs {ids:?}: {e}");
                    }
                    None
                }
                GateEffect::Cancel(ids) => {
                    // On failure the next poll sees them still there.
                    if let Err(e) = self.slurm.cancel(&ids).await {
                        tracing::warn!("cannot cancel Slurm jobs {ids:?}: {e}");
                    }
                    None
                }
                GateEffect::Signal {
                    slurm,
                    signal,
                    which,
                } => {
                    if let Err(e) = self.slurm.signal(slurm, signal, which).await {
                        tracing::warn!("cannot signal Slurm job {slurm}: {e}");
                    }
                    None
                }
                GateEffect::SetFeatures { node, features } => {
                    if let Err(e) = self.slurm.set_features(&node, &features).await {
                        tracing::warn!(node, "cannot set the node's dataset features: {e}");
                    }
                    None
                }
                GateEffect::Observe => self.read().await,
                GateEffect::Account(missing) => match self.slurm.accounting(7).await {
                    Ok(records) => Some(GateEvent::Accounted { missing, records }),
                    Err(e) => {
                        // Kept tracked and looked for again at the next poll: taking an
                        // attempt for one that never started would run it twice.
                        tracing::warn!("cannot read Slurm's accounting: {e}");
                        None
                    }
                },
                GateEffect::Report(r) => {
                    let _ = self.reports.send(r);
                    None
                }
                GateEffect::View(v) => {
                    let _ = self.engine.send(Request::SlurmView(v)).await;
                    None
                }
            };
            if let Some(event) = next {
                let more = self.core.handle(event, self.clock.now_ms());
                // What an answer leads to comes before what was queued after the question.
                for e in more.into_iter().rev() {
                    effects.push_front(e);
                }
            }
        }
    }

    /// Reads the queue, then the nodes: the event that says what they show.
    async fn read(&self) -> Option<GateEvent> {
        // The queue first: a job that failed with its node was failed after the node went
        // DOWN, so the nodes read next show it DOWN, and the job follows the node's rules.
        let queue = match self.slurm.queue().await {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!("cannot read Slurm's queue: {e}");
                return Some(GateEvent::Unreachable);
            }
        };
        match self.slurm.nodes().await {
            Ok(nodes) => Some(GateEvent::Observed { queue, nodes }),
            Err(e) => {
                tracing::warn!("cannot read Slurm's nodes: {e}");
                None
            }
        }
    }

    /// One poll.
    async fn observe(&mut self) {
        if let Some(event) = self.read().await {
            self.handle(event).await;
        }
    }
}

/// A failed sbatch as the core takes it.
fn failure(e: &SlurmError) -> SubmitFailure {
    SubmitFailure {
        transient: e.is_transient(),
        text: e.to_string(),
    }
}
