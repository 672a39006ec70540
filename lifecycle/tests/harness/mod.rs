//! A harness for the lifecycle, like Nomad's scheduler Harness: it feeds events, records every
//! effect, and applies them to stand-ins for the shell. The database is a map of job records
//! built only from [`Effect::Persist`]; the nodes are sets of running attempts; GPUs are held
//! by a small allocator; charges go to a ledger. No process, socket or clock is involved.

use labpool_lifecycle::{
    Effect, Event, JobLife, Lifecycle, Outcome, Placement, Readiness, StageKind, Transition,
};
use labpool_scheduler::JobState;
use std::collections::{BTreeMap, BTreeSet};

/// One simulated node: its GPUs, and the attempts its shims run.
#[derive(Debug, Default, Clone)]
pub struct SimNode {
    /// GPUs it has.
    pub gpus: u32,
    /// (job, attempt) running there.
    pub running: BTreeSet<(u64, u32)>,
    /// (job, attempt) being staged there.
    pub staging: BTreeSet<(u64, u32)>,
    /// Reachable by the controller.
    pub up: bool,
    /// (job, attempt) ends the node reports once it is reachable.
    pub outbox: Vec<(u64, u32, Outcome)>,
}

/// The harness.
pub struct Harness {
    /// The lifecycle under test.
    pub life: Lifecycle,
    /// The database stand-in: every job ever admitted, as the persisted transitions leave it.
    pub store: BTreeMap<u64, JobLife>,
    /// Nodes by name.
    pub nodes: BTreeMap<String, SimNode>,
    /// GPUs held: (node, gpu) → job.
    pub held: BTreeMap<(String, u32), u64>,
    /// Every effect, in order.
    pub effects: Vec<Effect>,
    /// Terminal transitions persisted, per job.
    pub ends: BTreeMap<u64, u32>,
    /// Charges, per job: GPU-milliseconds.
    pub ledger: BTreeMap<u64, Vec<i64>>,
    /// The clock, ms.
    pub now: i64,
    /// GPU-milliseconds of requeued attempts, until the requeue says whether they are charged.
    ran: BTreeMap<u64, i64>,
    /// Charges of requeued attempts (a requeue asked for), per job: GPU-milliseconds.
    pub requeue_charges: BTreeMap<u64, Vec<i64>>,
    next_id: u64,
}

impl Harness {
    /// A harness with nodes `n0..` of `gpus` GPUs each.
    pub fn new(nodes: usize, gpus: u32) -> Harness {
        Harness {
            life: Lifecycle::new(),
            store: BTreeMap::new(),
            nodes: (0..nodes)
                .map(|i| {
                    let n = SimNode {
                        gpus,
                        up: true,
                        ..SimNode::default()
                    };
                    (format!("n{i}"), n)
                })
                .collect(),
            held: BTreeMap::new(),
            effects: Vec::new(),
            ends: BTreeMap::new(),
            ledger: BTreeMap::new(),
            now: 1_000_000,
            ran: BTreeMap::new(),
            requeue_charges: BTreeMap::new(),
            next_id: 1,
        }
    }

    /// Submits a job; returns its id.
    pub fn submit(&mut self, requeue: bool) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.life.admit(id, JobLife::pending(requeue));
        self.store.insert(id, JobLife::pending(requeue));
        id
    }

    /// Feeds an event at the harness's clock and carries out its effects.
    pub fn event(&mut self, e: Event) -> Vec<Effect> {
        let out = self.life.handle(e, self.now);
        self.carry_out(&out);
        out
    }

    /// Places `job` on `node` holding `gpus` free GPUs, with `ready`. Returns false when the
    /// job is not pending or the node has not enough free GPUs or is down.
    pub fn place(&mut self, job: u64, node: &str, gpus: u32, ready: Readiness) -> bool {
        let pending = self
            .life
            .job(job)
            .is_some_and(|l| l.state == JobState::Pending);
        let n = &self.nodes[node];
        if !pending || !n.up {
            return false;
        }
        let free: Vec<u32> = (0..n.gpus)
            .filter(|g| !self.held.contains_key(&(node.to_string(), *g)))
            .take(gpus as usize)
            .collect();
        if free.len() < gpus as usize {
            return false;
        }
        for g in &free {
            self.held.insert((node.to_string(), *g), job);
        }
        let placement = Placement {
            node: node.to_string(),
            gpus: free,
            stdout: format!("/out/{job}").into(),
            stderr: format!("/out/{job}").into(),
            others: Vec::new(),
            ports: None,
        };
        self.event(Event::Placed {
            job,
            placement,
            ready,
        });
        true
    }

    /// The node lets `job`'s current running attempt end with `state`; the report is sent at
    /// once when the node is up, else when it comes back.
    pub fn finish(&mut self, node: &str, job: u64, attempt: u32, state: JobState) {
        let n = self.nodes.get_mut(node).expect("a node");
        if !n.running.remove(&(job, attempt)) {
            return;
        }
        let outcome = Outcome {
            state,
            exit_code: Some(if state == JobState::Completed { 0 } else { 1 }),
            signal: None,
            end_time_ms: self.now,
            reason: None,
        };
        n.outbox.push((job, attempt, outcome));
        self.flush(node);
    }

    /// Sends a node's queued reports, if it is up.
    pub fn flush(&mut self, node: &str) {
        if !self.nodes[node].up {
            return;
        }
        let outbox = std::mem::take(&mut self.nodes.get_mut(node).expect("a node").outbox);
        for (job, attempt, outcome) in outbox {
            self.event(Event::Ended {
                node: node.to_string(),
                job,
                attempt,
                outcome,
            });
        }
    }

    /// The node's link is cut (it keeps running its shims) and the controller declares it DOWN.
    pub fn cut(&mut self, node: &str) {
        self.nodes.get_mut(node).expect("a node").up = false;
        self.event(Event::NodeDown {
            node: node.to_string(),
            reason: "no heartbeat".into(),
        });
    }

    /// The node's link is back: it rejoins and is fenced, then sends its reports.
    pub fn heal(&mut self, node: &str) {
        self.nodes.get_mut(node).expect("a node").up = true;
        self.event(Event::NodeUp {
            node: node.to_string(),
        });
        self.flush(node);
    }

    /// The controller restarts: a new lifecycle from the database stand-in, then recovery.
    pub fn restart(&mut self) {
        let mut life = Lifecycle::new();
        for (id, l) in &self.store {
            if !l.is_terminal() {
                life.admit(*id, l.clone());
            }
        }
        self.life = life;
        let up: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.up)
            .map(|(name, _)| name.clone())
            .collect();
        let out = self.life.recover(up.iter().map(String::as_str));
        self.carry_out(&out);
        for node in up {
            self.flush(&node);
        }
    }

    /// Carries out effects as the shell would.
    pub fn carry_out(&mut self, effects: &[Effect]) {
        for e in effects {
            self.effects.push(e.clone());
            match e {
                Effect::Persist { job, transition } => {
                    let rec = self
                        .store
                        .get_mut(job)
                        .expect("a persisted job was admitted");
                    let started = rec.start_time;
                    let gpus = rec.gpus.len() as i64;
                    rec.apply(transition);
                    if let (Transition::Requeued { time, .. }, Some(start)) = (transition, started)
                    {
                        self.ran.insert(*job, gpus * (time - start));
                    }
                    if let Transition::Ended { time, .. } = transition {
                        *self.ends.entry(*job).or_default() += 1;
                        if let Some(start) = started {
                            self.ledger
                                .entry(*job)
                                .or_default()
                                .push(gpus * (time - start));
                        }
                    }
                }
                Effect::Launch {
                    job, attempt, node, ..
                } => {
                    let n = self.nodes.get_mut(node).expect("a node");
                    n.staging.remove(&(*job, *attempt));
                    n.running.insert((*job, *attempt));
                }
                Effect::Stage {
                    job, attempt, node, ..
                } => {
                    let n = self.nodes.get_mut(node).expect("a node");
                    n.staging.insert((*job, *attempt));
                }
                Effect::Kill { job, attempt, node } => {
                    let cancelled = Outcome {
                        state: JobState::Cancelled,
                        exit_code: None,
                        signal: Some(15),
                        end_time_ms: self.now,
                        reason: None,
                    };
                    let n = self.nodes.get_mut(node).expect("a node");
                    if n.running.remove(&(*job, *attempt)) {
                        n.outbox.push((*job, *attempt, cancelled));
                    }
                }
                Effect::Notice {
                    job, attempt, node, ..
                } => {
                    // The job saves its work on the notice and exits.
                    let exited = Outcome::decided(JobState::Completed, self.now, "notice".into());
                    let n = self.nodes.get_mut(node).expect("a node");
                    if n.running.remove(&(*job, *attempt)) {
                        n.outbox.push((*job, *attempt, exited));
                    }
                }
                Effect::Adopt { node, expected } => {
                    let keep: BTreeSet<(u64, u32)> = expected.iter().copied().collect();
                    let n = self.nodes.get_mut(node).expect("a node");
                    n.running.retain(|a| keep.contains(a));
                    n.staging.clear();
                }
                Effect::Requeue { job, charged } => {
                    let ran = self.ran.remove(job);
                    if *charged {
                        let ran = ran.expect("a charged requeue ran");
                        self.requeue_charges.entry(*job).or_default().push(ran);
                    }
                    self.free(*job)
                }
                Effect::Release { job, .. } | Effect::Dequeue { job } => {
                    self.free(*job);
                    self.life.remove(*job);
                }
                // The scenarios suspend no session (the lifecycle's unit tests do).
                Effect::Forget { .. }
                | Effect::Ignored { .. }
                | Effect::HoldChanged { .. }
                | Effect::Suspend { .. }
                | Effect::Restore { .. } => {}
            }
        }
    }

    fn free(&mut self, job: u64) {
        self.held.retain(|_, j| *j != job);
        for n in self.nodes.values_mut() {
            n.staging.retain(|(j, _)| *j != job);
        }
    }

    /// The invariants, checked after every step; the error names the one broken.
    pub fn check(&self) -> Result<(), String> {
        // Memory and the database stand-in agree, for every job still tracked.
        for (id, l) in self.life.jobs() {
            if self.store.get(id) != Some(l) {
                return Err(format!("job {id}: memory and store differ"));
            }
        }
        // No GPU held twice: the placed jobs' GPUs are distinct and match the allocator.
        let mut seen = BTreeSet::new();
        for (id, l) in &self.store {
            if matches!(l.state, JobState::Staging | JobState::Running) {
                for g in &l.gpus {
                    let key = (l.node.clone().unwrap_or_default(), *g);
                    if !seen.insert(key.clone()) {
                        return Err(format!("GPU {key:?} held twice (job {id})"));
                    }
                    if self.held.get(&key) != Some(id) {
                        return Err(format!("job {id} holds {key:?}, the allocator disagrees"));
                    }
                }
            }
        }
        if seen.len() != self.held.len() {
            return Err(format!(
                "{} GPUs allocated, {} held by placed jobs",
                self.held.len(),
                seen.len()
            ));
        }
        // Each job ends at most once, and an ended job stays ended.
        for (id, n) in &self.ends {
            if *n > 1 {
                return Err(format!("job {id} ended {n} times"));
            }
            if !self.store[id].is_terminal() {
                return Err(format!("job {id} ended, then changed state again"));
            }
        }
        // No fenced attempt runs on a node the controller can reach.
        for (name, n) in &self.nodes {
            if !n.up {
                continue;
            }
            for (job, attempt) in &n.running {
                let l = &self.store[job];
                let current = l.is_current(*attempt, JobState::Running)
                    && l.node.as_deref() == Some(name.as_str());
                if !current {
                    return Err(format!(
                        "attempt {attempt} of job {job} runs on {name} after it was fenced ({:?}, attempt {})",
                        l.state, l.attempt
                    ));
                }
            }
        }
        // The ledger balances: one charge per job that ran and ended, none otherwise.
        for (id, charges) in &self.ledger {
            if charges.len() != 1 || charges[0] < 0 {
                return Err(format!("job {id} charged {charges:?}"));
            }
        }
        Ok(())
    }

    /// Every job has reached exactly one terminal state.
    pub fn all_ended_once(&self) -> Result<(), String> {
        for (id, l) in &self.store {
            if !l.is_terminal() || self.ends.get(id) != Some(&1) {
                return Err(format!(
                    "job {id} is {:?}, ended {:?} times",
                    l.state,
                    self.ends.get(id)
                ));
            }
        }
        Ok(())
    }

    /// The current attempt and node of `job`.
    pub fn attempt_of(&self, job: u64) -> (u32, Option<String>) {
        let l = &self.store[&job];
        (l.attempt, l.node.clone())
    }

    /// The data-stage readiness with a description.
    pub fn data_stage() -> Readiness {
        Readiness::Stage(StageKind::Data, "staging imagenet@1a2b".into())
    }

    /// The environment-stage readiness with a description.
    pub fn env_stage() -> Readiness {
        Readiness::Stage(
            StageKind::Env,
            "putting environment torch on the node".into(),
        )
    }

    /// Ready to start.
    pub fn ready() -> Readiness {
        Readiness::Ready {
            isolation: "cgroup v2".into(),
        }
    }
}
