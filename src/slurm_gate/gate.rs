//! The gate's task: it takes the orders the engine would send agents about running attempts,
//! carries them out in Slurm, and reads Slurm's queue every `[executor] poll` to report back
//! what the agents would: ends, adoptions, attempts that never started. It also tells the
//! engine what Slurm runs for others (foreign load) and which nodes Slurm has down or draining.

use crate::api::SignalTarget;
use crate::api::agent::{AgentOrder, AgentReport};
use crate::controller::engine::Request;
use crate::slurm_gate::command::Slurm;
use crate::slurm_gate::node::NodeLine;
use crate::slurm_gate::outcome::outcome_of;
use crate::slurm_gate::queue::SlurmJob;
use crate::slurm_gate::submit::Submission;
use crate::slurm_gate::view::{FEATURE_PREFIX, SlurmView, feature_of, view_of};
use labpool_lifecycle::Outcome;
use labpool_scheduler::JobState;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod settle;

/// What the engine sends the gate.
#[derive(Debug)]
pub enum GateOrder {
    /// Submit this attempt held, pinned and tagged, then release it.
    Start(Box<Submission>),
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

/// One attempt the gate answers for.
#[derive(Debug)]
struct Tracked {
    node: String,
    /// Slurm's id, once known.
    slurm: Option<u64>,
    /// When it was released, while it has not been seen running.
    released: Option<Instant>,
    /// Known only from an adoption: it is looked for by its tag.
    adopted: bool,
    /// Its stop is due then (after a preemption notice).
    stop_at: Option<Instant>,
    /// The start time reported, ms.
    started_ms: Option<i64>,
    /// labpool stopped it (cancel, requeue, preemption): cancelled in Slurm, its end is still
    /// reported from the queue.
    kill: bool,
}

/// The gate's state.
pub struct Gate {
    slurm: Slurm,
    pool: String,
    as_root: bool,
    start_timeout: Duration,
    reports: mpsc::UnboundedSender<AgentReport>,
    engine: mpsc::Sender<Request>,
    tracked: BTreeMap<(u64, u32), Tracked>,
    /// Nodes told what they run since the gate started: a tagged job there that is not
    /// tracked is an orphan and is cancelled.
    adopted: BTreeSet<String>,
    last_view: Option<SlurmView>,
    /// The datasets each node holds, as the engine last said.
    holdings: BTreeMap<String, Vec<String>>,
}

impl Gate {
    /// A gate over `slurm`.
    pub fn new(
        slurm: Slurm,
        pool: String,
        start_timeout: Duration,
        reports: mpsc::UnboundedSender<AgentReport>,
        engine: mpsc::Sender<Request>,
    ) -> Gate {
        Gate {
            slurm,
            pool,
            as_root: nix::unistd::geteuid().is_root(),
            start_timeout,
            reports,
            engine,
            tracked: BTreeMap::new(),
            adopted: BTreeSet::new(),
            last_view: None,
            holdings: BTreeMap::new(),
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
                    self.orders(batch).await;
                }
                _ = tick.tick() => self.poll().await,
            }
        }
    }

    /// Carries out orders in the order they came; consecutive starts are released together.
    async fn orders(&mut self, batch: Vec<GateOrder>) {
        let mut starts = Vec::new();
        for order in batch {
            if !matches!(order, GateOrder::Start(_)) && !starts.is_empty() {
                self.start(std::mem::take(&mut starts)).await;
            }
            match order {
                GateOrder::Start(s) => starts.push(*s),
                GateOrder::Holdings(h) => self.holdings = h,
                GateOrder::NodeLost(node) => self.node_lost(&node).await,
                GateOrder::Agent { node, order } => self.agent_order(node, order).await,
            }
        }
        if !starts.is_empty() {
            self.start(starts).await;
        }
    }

    async fn node_lost(&mut self, node: &str) {
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
        self.cancel(&ids).await;
    }

    /// Submits each attempt held, then releases them all in one call.
    async fn start(&mut self, starts: Vec<Submission>) {
        let mut held = Vec::new();
        for s in starts {
            let key = (s.launch.job, s.launch.attempt);
            if self.tracked.contains_key(&key) {
                continue;
            }
            match self.slurm.submit_held(&s, self.as_root, &self.pool).await {
                Ok(id) => {
                    tracing::info!(
                        job = key.0,
                        attempt = key.1,
                        slurm = id,
                        node = s.node,
                        "submitted to Slurm, held"
                    );
                    self.tracked.insert(
                        key,
                        Tracked {
                            node: s.node.clone(),
                            slurm: Some(id),
                            released: Some(Instant::now()),
                            adopted: false,
                            stop_at: None,
                            started_ms: None,
                            kill: false,
                        },
                    );
                    held.push(id);
                }
                Err(e) if e.is_transient() => {
                    // slurmctld restarting or unreachable: placed again, not failed.
                    tracing::warn!(job = key.0, attempt = key.1, "cannot submit to Slurm: {e}");
                    self.report(AgentReport::NeverStarted {
                        node: s.node.clone(),
                        job: key.0,
                        attempt: key.1,
                        why: Some(format!(
                            "it could not be submitted to Slurm ({e}); it waits to be placed again"
                        )),
                    });
                }
                Err(e) => {
                    tracing::error!(job = key.0, attempt = key.1, "Slurm refused the job: {e}");
                    let outcome = Outcome::decided(
                        JobState::Failed,
                        crate::clock::now_ms(),
                        format!("Slurm refused it: {e}"),
                    );
                    self.report(AgentReport::Ended {
                        node: s.node.clone(),
                        job: key.0,
                        attempt: key.1,
                        outcome,
                        steps: Vec::new(),
                    });
                }
            }
        }
        if !held.is_empty()
            && let Err(e) = self.slurm.release(&held).await
        {
            // Left held: the next poll sees it pending past the start timeout and it is
            // placed again.
            tracing::error!("cannot release Slurm jobs {held:?}: {e}");
        }
    }

    async fn agent_order(&mut self, node: String, order: AgentOrder) {
        match order {
            AgentOrder::Kill { job, attempt } => {
                // Still tracked: its end (CANCELLED) is reported from the queue, as an agent
                // reports the end of a job it killed.
                let Some(t) = self.tracked.get_mut(&(job, attempt)) else {
                    return;
                };
                t.kill = true;
                if let Some(id) = t.slurm {
                    self.cancel(&[id]).await;
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
                t.stop_at = Some(Instant::now() + Duration::from_millis(grace_ms));
                if let Some(id) = t.slurm {
                    let (sig, which) = match signal {
                        Some(s) if s.batch_only => (s.signal, Some("--batch")),
                        Some(s) => (s.signal, None),
                        None => (15, Some("--full")),
                    };
                    if let Err(e) = self.slurm.signal(id, sig, which).await {
                        tracing::warn!(job, attempt, "cannot signal Slurm job {id}: {e}");
                    }
                }
            }
            AgentOrder::Signal {
                job,
                attempt,
                signal,
                target,
            } => {
                let Some(id) = self.tracked.get(&(job, attempt)).and_then(|t| t.slurm) else {
                    return;
                };
                let which = match target {
                    SignalTarget::Steps => None,
                    SignalTarget::Batch => Some("--batch"),
                    SignalTarget::All => Some("--full"),
                };
                if let Err(e) = self.slurm.signal(id, signal, which).await {
                    tracing::warn!(job, attempt, "cannot signal Slurm job {id}: {e}");
                }
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
                self.cancel(&ids).await;
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
                self.poll().await;
            }
            other => tracing::debug!(node, "not a Slurm order: {other:?}"),
        }
    }

    /// Keeps each node's `ds_<name>` features equal to the datasets it holds, so that plain
    /// `sbatch --prefer=ds_imagenet` users go where the data is too. Features labpool did not
    /// set are kept. `scontrol reconfig` and a slurmctld restart reset features to
    /// `slurm.conf`'s: the next poll sees that and sets them again.
    async fn mirror_features(&self, nodes: &[NodeLine]) {
        for n in nodes {
            let Some(held) = self.holdings.get(&n.name) else {
                continue;
            };
            let have: Vec<&str> = n
                .features
                .split(',')
                .filter(|f| !f.is_empty() && *f != "(null)")
                .collect();
            let mut want: Vec<String> = have
                .iter()
                .filter(|f| !f.starts_with(FEATURE_PREFIX))
                .map(|f| f.to_string())
                .collect();
            want.extend(held.iter().map(|d| feature_of(d)));
            let mut sorted_have: Vec<String> = have.iter().map(|f| f.to_string()).collect();
            sorted_have.sort();
            let mut sorted_want = want.clone();
            sorted_want.sort();
            if sorted_have == sorted_want {
                continue;
            }
            if let Err(e) = self.slurm.set_features(&n.name, &want).await {
                tracing::warn!(node = n.name, "cannot set the node's dataset features: {e}");
            }
        }
    }

    /// Cancels Slurm jobs, if any; a failure is logged (the next poll sees them still there).
    async fn cancel(&self, ids: &[u64]) {
        if !ids.is_empty()
            && let Err(e) = self.slurm.cancel(ids).await
        {
            tracing::warn!("cannot cancel Slurm jobs {ids:?}: {e}");
        }
    }

    fn report(&self, r: AgentReport) {
        let _ = self.reports.send(r);
    }

    /// Reads the queue and the nodes, and reports what changed.
    async fn poll(&mut self) {
        // The queue first: a job that failed with its node was failed after the node went
        // DOWN, so the nodes read next show it DOWN, and the job follows the node's rules.
        let queue = match self.slurm.queue().await {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!("cannot read Slurm's queue: {e}");
                // While slurmctld does not answer (a restart), no job can start: the start
                // timeout counts again from when it answers.
                let now = Instant::now();
                for t in self.tracked.values_mut() {
                    if t.released.is_some() {
                        t.released = Some(now);
                    }
                }
                return;
            }
        };
        let nodes = match self.slurm.nodes().await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("cannot read Slurm's nodes: {e}");
                return;
            }
        };
        self.mirror_features(&nodes).await;
        let view = view_of(&nodes, &queue, &self.pool);
        if self.last_view.as_ref() != Some(&view) {
            let _ = self.engine.send(Request::SlurmView(view.clone())).await;
            self.last_view = Some(view.clone());
        }
        // The jobs of a node that went down are the engine's to requeue, as a lost agent's.
        let lost: Vec<(u64, u32)> = self
            .tracked
            .iter()
            .filter(|(_, t)| view.down.contains_key(&t.node))
            .map(|(k, _)| *k)
            .collect();
        let mut by_tag: BTreeMap<(u64, u32), &SlurmJob> = BTreeMap::new();
        for j in &queue {
            if let Some(key) = j.labpool(&self.pool) {
                // Should one attempt have two Slurm jobs, the newest answers for it.
                if by_tag.get(&key).is_none_or(|o| o.job_id < j.job_id) {
                    by_tag.insert(key, j);
                }
            }
        }
        let mut cancel = Vec::new();
        let mut release = Vec::new();
        for key in lost {
            if let Some(t) = self.tracked.remove(&key) {
                cancel.extend(t.slurm.or_else(|| by_tag.get(&key).map(|j| j.job_id)));
            }
        }
        let now = Instant::now();
        let mut done = Vec::new();
        let mut missing = Vec::new();
        for (key, t) in self.tracked.iter_mut() {
            let (job, attempt) = *key;
            let Some(sj) = by_tag.get(key) else {
                if t.adopted || t.slurm.is_some() {
                    missing.push(*key);
                }
                continue;
            };
            if t.adopted {
                t.adopted = false;
                t.slurm = Some(sj.job_id);
                tracing::info!(job, attempt, slurm = sj.job_id, "re-adopted from Slurm");
                self.reports
                    .send(AgentReport::Adopted {
                        node: t.node.clone(),
                        job,
                        attempt,
                    })
                    .ok();
                if sj.job_state == "PENDING" {
                    if sj.state_reason.starts_with("JobHeld") {
                        release.push(sj.job_id);
                    }
                    // Released and pending: the start timeout counts from now.
                    t.released = Some(now);
                }
            }
            // Slurm's start time is the attempt's: its elapsed time and its charge count from it.
            if sj.start_time > 0
                && (sj.holds_resources() || sj.is_final() && sj.end_time >= sj.start_time)
                && t.started_ms != Some(sj.start_time * 1000)
            {
                t.started_ms = Some(sj.start_time * 1000);
                self.reports
                    .send(AgentReport::Running {
                        node: t.node.clone(),
                        job,
                        attempt,
                        since_ms: sj.start_time * 1000,
                    })
                    .ok();
            }
            if sj.is_final() {
                self.reports
                    .send(AgentReport::Ended {
                        node: t.node.clone(),
                        job,
                        attempt,
                        outcome: outcome_of(sj),
                        steps: Vec::new(),
                    })
                    .ok();
                done.push(*key);
            } else if t.kill {
                cancel.push(sj.job_id);
            } else if sj.holds_resources() {
                t.released = None;
                if t.stop_at.is_some_and(|at| now >= at) {
                    t.stop_at = None;
                    cancel.push(sj.job_id);
                }
            } else if t
                .released
                .is_some_and(|at| now.duration_since(at) > self.start_timeout)
            {
                tracing::warn!(
                    job,
                    attempt,
                    slurm = sj.job_id,
                    reason = sj.state_reason,
                    "Slurm did not start it: placed again"
                );
                cancel.push(sj.job_id);
                self.reports
                    .send(AgentReport::NeverStarted {
                        node: t.node.clone(),
                        job,
                        attempt,
                        why: Some(format!(
                            "Slurm did not start its job {} on {} within the start timeout ({}s, [executor] start_timeout): {}; it was cancelled there and waits to be placed again",
                            sj.job_id,
                            t.node,
                            self.start_timeout.as_secs(),
                            sj.state_reason
                        )),
                    })
                    .ok();
                done.push(*key);
            }
        }
        for key in done {
            self.tracked.remove(&key);
        }
        if !missing.is_empty() {
            self.settle_missing(missing).await;
        }
        // Orphans: tagged, unfinished, on a node the gate answers for, and not tracked.
        for (key, sj) in &by_tag {
            // A multi-node job is an orphan only once all of its nodes were told what they
            // run: its batch node's list names it, its other nodes' never do.
            let names = sj.node_names();
            let node_known = !names.is_empty() && names.iter().all(|n| self.adopted.contains(n));
            if !sj.is_final() && !self.tracked.contains_key(key) && node_known {
                cancel.push(sj.job_id);
            }
        }
        if !release.is_empty()
            && let Err(e) = self.slurm.release(&release).await
        {
            tracing::warn!("cannot release Slurm jobs {release:?}: {e}");
        }
        cancel.sort_unstable();
        cancel.dedup();
        self.cancel(&cancel).await;
    }
}
