//! The gate core against a fake Slurm, in seeded runs: an engine model starts, kills, notices
//! and signals attempts, loses nodes' agents and restarts the controller (a fresh core, then
//! `Adopt` for every node); the fake Slurm starts released jobs unless foreign load holds their
//! node, ends them, forgets them from the queue after `MinJobAge`, fails nodes, and sometimes
//! does not answer or refuses a submission. After every step: no attempt was submitted twice
//! and none has two live Slurm jobs, and no end was reported twice. When the faults stop and
//! the gate has polled a while: what runs in Slurm is exactly what labpool expects, and every
//! attempt labpool no longer expects was reported ended.

use super::{GateCore, GateEffect, GateEvent, SubmitFailure};
use crate::api::agent::{AgentOrder, AgentReport, Launch};
use crate::slurm_gate::GateOrder;
use crate::slurm_gate::node::NodeLine;
use crate::slurm_gate::queue::{SlurmJob, tag};
use crate::slurm_gate::submit::Submission;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

const POOL: &str = "p1";
const NODES: [&str; 3] = ["n1", "n2", "n3"];
const START_TIMEOUT_MS: i64 = 10_000;
const MIN_JOB_AGE_MS: i64 = 300_000;

/// One job in the fake Slurm.
#[derive(Debug, Clone)]
struct FakeJob {
    id: u64,
    comment: String,
    node: String,
    /// PENDING, RUNNING or a final state.
    state: String,
    held: bool,
    start_ms: i64,
    end_ms: i64,
}

impl FakeJob {
    fn live(&self) -> bool {
        matches!(self.state.as_str(), "PENDING" | "RUNNING")
    }

    fn as_slurm(&self) -> SlurmJob {
        SlurmJob {
            job_id: self.id,
            job_state: self.state.clone(),
            state_reason: if self.held {
                "JobHeldAdmin".into()
            } else {
                "Resources".into()
            },
            comment: self.comment.clone(),
            nodes: if self.state == "PENDING" {
                String::new()
            } else {
                self.node.clone()
            },
            required_nodes: self.node.clone(),
            start_time: self.start_ms / 1000,
            end_time: self.end_ms / 1000,
            ..SlurmJob::default()
        }
    }
}

/// A Slurm that keeps jobs in memory.
#[derive(Debug, Default)]
struct FakeSlurm {
    jobs: BTreeMap<u64, FakeJob>,
    next_id: u64,
    down: BTreeSet<String>,
    /// Nodes whose GPUs a foreign job holds: nothing released there starts.
    foreign: BTreeSet<String>,
    unreachable: bool,
    refuse_next: bool,
    /// Jobs end only when cancelled (while the harness checks what is left running).
    no_ends: bool,
    /// How many times each tag was submitted.
    submits: BTreeMap<String, u32>,
}

impl FakeSlurm {
    fn submit(&mut self, s: &Submission, now: i64) -> Result<u64, SubmitFailure> {
        if self.unreachable {
            return Err(SubmitFailure {
                transient: true,
                text: "Unable to contact slurm controller".into(),
            });
        }
        if std::mem::take(&mut self.refuse_next) {
            return Err(SubmitFailure {
                transient: false,
                text: "Invalid generic resource (gres) specification".into(),
            });
        }
        let t = tag(s.launch.job, s.launch.attempt);
        *self.submits.entry(t.clone()).or_default() += 1;
        self.next_id += 1;
        let job = FakeJob {
            id: self.next_id,
            comment: format!("{t};pool={POOL}"),
            node: s.node.clone(),
            state: "PENDING".into(),
            held: true,
            start_ms: 0,
            end_ms: now,
        };
        self.jobs.insert(job.id, job);
        Ok(self.next_id)
    }

    fn end(&mut self, id: u64, state: &str, now: i64) {
        if let Some(j) = self.jobs.get_mut(&id).filter(|j| j.live()) {
            j.state = state.into();
            j.end_ms = now;
        }
    }

    /// One tick of Slurm: released jobs start where nothing blocks them, running ones end now
    /// and then, nodes fail and come back.
    fn tick(&mut self, now: i64, rng: &mut fastrand::Rng) {
        let ids: Vec<u64> = self.jobs.keys().copied().collect();
        for id in ids {
            let j = &self.jobs[&id];
            match j.state.as_str() {
                "PENDING"
                    if !j.held
                        && !self.foreign.contains(&j.node)
                        && !self.down.contains(&j.node) =>
                {
                    let j = self.jobs.get_mut(&id).unwrap();
                    j.state = "RUNNING".into();
                    j.start_ms = now;
                }
                "RUNNING" if self.down.contains(&j.node) => self.end(id, "NODE_FAIL", now),
                "RUNNING" if !self.no_ends && rng.u32(0..60) == 0 => {
                    let state = if rng.bool() { "COMPLETED" } else { "FAILED" };
                    self.end(id, state, now);
                }
                _ => {}
            }
        }
    }

    fn queue(&self, now: i64) -> Vec<SlurmJob> {
        self.jobs
            .values()
            .filter(|j| j.live() || now - j.end_ms < MIN_JOB_AGE_MS)
            .map(FakeJob::as_slurm)
            .collect()
    }

    fn nodes(&self) -> Vec<NodeLine> {
        NODES
            .iter()
            .map(|n| {
                let state = if self.down.contains(*n) {
                    "DOWN"
                } else {
                    "IDLE"
                };
                NodeLine::parse(&format!("NodeName={n} Gres=gpu:a100:8 State={state}")).unwrap()
            })
            .collect()
    }

    fn accounting(&self) -> Vec<SlurmJob> {
        self.jobs.values().map(FakeJob::as_slurm).collect()
    }

    fn live_tags(&self) -> BTreeMap<(u64, u32), Vec<u64>> {
        let mut out: BTreeMap<(u64, u32), Vec<u64>> = BTreeMap::new();
        for j in self.jobs.values().filter(|j| j.live()) {
            let key = crate::slurm_gate::queue::parse_tag(&j.comment).unwrap();
            out.entry(key).or_default().push(j.id);
        }
        out
    }
}

/// The engine as the gate sees it: the attempts it expects to run, and the ends it was told.
#[derive(Debug, Default)]
struct Model {
    expected: BTreeMap<(u64, u32), String>,
    next_job: u64,
    ends: BTreeMap<(u64, u32), u32>,
    /// Attempts told to stop.
    killed: BTreeSet<(u64, u32)>,
    /// Attempts labpool requeued itself (their node was lost or went down): no end comes.
    dropped: BTreeSet<(u64, u32)>,
    /// The nodes the last view had down: nothing is placed there.
    down: BTreeSet<String>,
    /// Attempts started since the controller last started: an order may come twice (a
    /// retried delivery), never across a restart (the engine adopts then).
    started: BTreeSet<(u64, u32)>,
}

impl Model {
    fn take(&mut self, r: &AgentReport) -> Vec<GateOrder> {
        match r {
            AgentReport::Ended {
                job, attempt, node, ..
            }
            | AgentReport::NeverStarted {
                job, attempt, node, ..
            } => {
                let key = (*job, *attempt);
                *self.ends.entry(key).or_default() += 1;
                self.expected.remove(&key);
                vec![GateOrder::Agent {
                    node: node.clone(),
                    order: AgentOrder::Forget {
                        job: *job,
                        attempt: *attempt,
                    },
                }]
            }
            _ => Vec::new(),
        }
    }

    /// A node down in Slurm: its attempts are requeued (the lifecycle's NodeDown).
    fn node_down(&mut self, node: &str) {
        let gone: Vec<(u64, u32)> = self
            .expected
            .iter()
            .filter(|(_, n)| *n == node)
            .map(|(k, _)| *k)
            .collect();
        for key in gone {
            self.expected.remove(&key);
            self.dropped.insert(key);
        }
    }
}

fn submission(job: u64, attempt: u32, node: &str) -> Submission {
    let launch: Launch = serde_json::from_value(serde_json::json!({
        "job": job, "attempt": attempt, "name": "t", "user": "u", "uid": 1000, "gid": 1000,
        "partition": "normal", "script": "#!/bin/sh\n", "args": [], "workdir": "/w",
        "stdout": "/w/o", "stderr": "/w/e", "environment": {}, "gpus": [0],
        "cpus": 1, "mem_mib": 0, "kill_grace_ms": 1000, "umask": 18, "datasets": [],
    }))
    .expect("a launch");
    Submission {
        launch,
        node: node.to_string(),
        data: Vec::new(),
        staged: Vec::new(),
        mem_mib: 1024,
        shards: None,
    }
}

/// The shell, synchronous: runs the core's effects against the fake, feeding answers back.
struct World {
    core: GateCore,
    slurm: FakeSlurm,
    model: Model,
    now: i64,
}

impl World {
    fn new() -> World {
        World {
            core: GateCore::new(POOL.into(), START_TIMEOUT_MS),
            slurm: FakeSlurm::default(),
            model: Model::default(),
            now: 1_000_000,
        }
    }

    fn handle(&mut self, event: GateEvent) {
        let mut effects: VecDeque<GateEffect> = self.core.handle(event, self.now).into();
        while let Some(effect) = effects.pop_front() {
            let next = match effect {
                GateEffect::Submit(s) => Some(GateEvent::Submitted {
                    key: (s.launch.job, s.launch.attempt),
                    node: s.node.clone(),
                    result: self.slurm.submit(&s, self.now),
                }),
                GateEffect::Release(ids) => {
                    for id in ids {
                        if let Some(j) = self.slurm.jobs.get_mut(&id) {
                            j.held = false;
                        }
                    }
                    None
                }
                GateEffect::Cancel(ids) => {
                    for id in ids {
                        self.slurm.end(id, "CANCELLED", self.now);
                    }
                    None
                }
                GateEffect::Signal { .. } | GateEffect::SetFeatures { .. } => None,
                GateEffect::Observe => Some(self.read()),
                GateEffect::Account(missing) => Some(GateEvent::Accounted {
                    missing,
                    records: self.slurm.accounting(),
                }),
                GateEffect::Report(r) => {
                    // The engine's answer (a Forget) comes after what is under way.
                    for order in self.model.take(&r) {
                        let more = self.core.handle(GateEvent::Order(order), self.now);
                        effects.extend(more);
                    }
                    None
                }
                GateEffect::View(v) => {
                    for node in v.down.keys() {
                        self.model.node_down(node);
                    }
                    self.model.down = v.down.keys().cloned().collect();
                    None
                }
            };
            if let Some(event) = next {
                let more = self.core.handle(event, self.now);
                for e in more.into_iter().rev() {
                    effects.push_front(e);
                }
            }
        }
    }

    fn read(&self) -> GateEvent {
        if self.slurm.unreachable {
            return GateEvent::Unreachable;
        }
        GateEvent::Observed {
            queue: self.slurm.queue(self.now),
            nodes: self.slurm.nodes(),
        }
    }

    fn order(&mut self, order: GateOrder) {
        self.handle(GateEvent::Order(order));
        self.handle(GateEvent::BatchDone);
    }

    fn check(&self, seed: u64, step: usize) {
        for (t, n) in &self.slurm.submits {
            assert!(*n <= 1, "seed {seed} step {step}: {t} submitted {n} times");
        }
        for (key, ids) in self.slurm.live_tags() {
            assert!(
                ids.len() <= 1,
                "seed {seed} step {step}: attempt {key:?} has live Slurm jobs {ids:?}"
            );
        }
        for (key, n) in &self.model.ends {
            assert!(
                *n <= 1,
                "seed {seed} step {step}: the end of {key:?} was reported {n} times"
            );
        }
    }

    /// One random step of the engine, of Slurm, and of time.
    fn step(&mut self, rng: &mut fastrand::Rng) {
        match rng.u32(0..100) {
            0..=24 => {
                self.model.next_job += 1;
                let (job, node) = (self.model.next_job, NODES[rng.usize(0..NODES.len())]);
                if !self.model.down.contains(node) {
                    self.model.expected.insert((job, 1), node.to_string());
                    self.model.started.insert((job, 1));
                    self.order(GateOrder::Start(Box::new(submission(job, 1, node))));
                    if rng.u32(0..10) == 0 && self.core.tracked().contains_key(&(job, 1)) {
                        // Delivered twice (an order the gate took, retried).
                        self.order(GateOrder::Start(Box::new(submission(job, 1, node))));
                    }
                }
            }
            25..=31 => {
                if let Some((&key, node)) = pick(&self.model.expected, rng) {
                    let node = node.clone();
                    self.model.killed.insert(key);
                    self.order(GateOrder::Agent {
                        node,
                        order: AgentOrder::Kill {
                            job: key.0,
                            attempt: key.1,
                        },
                    });
                }
            }
            32..=35 => {
                if let Some((&key, node)) = pick(&self.model.expected, rng) {
                    let node = node.clone();
                    self.order(GateOrder::Agent {
                        node,
                        order: AgentOrder::Notice {
                            job: key.0,
                            attempt: key.1,
                            signal: None,
                            grace_ms: 5_000,
                            by: 0,
                        },
                    });
                }
            }
            36..=37 => {
                // A node's agent is lost: labpool places its attempts again.
                let node = NODES[rng.usize(0..NODES.len())];
                self.model.node_down(node);
                self.order(GateOrder::NodeLost(node.to_string()));
            }
            38..=40 if rng.u32(0..4) == 0 => {
                // The controller restarts: a fresh gate, then every node is told what it runs.
                // Sometimes labpool gave an attempt up meanwhile (its node's agent did not come
                // back in time): what Slurm still runs for it is an orphan.
                self.core = GateCore::new(POOL.into(), START_TIMEOUT_MS);
                self.model.started.clear();
                if rng.bool()
                    && let Some((&key, _)) = pick(&self.model.expected, rng)
                {
                    self.model.expected.remove(&key);
                    self.model.dropped.insert(key);
                }
                for node in NODES {
                    let expected: Vec<(u64, u32)> = self
                        .model
                        .expected
                        .iter()
                        .filter(|(_, n)| *n == node)
                        .map(|(k, _)| *k)
                        .collect();
                    self.order(GateOrder::Agent {
                        node: node.to_string(),
                        order: AgentOrder::Adopt { expected },
                    });
                }
            }
            41..=43 => {
                let node = NODES[rng.usize(0..NODES.len())].to_string();
                if !self.slurm.down.remove(&node) {
                    self.slurm.down.insert(node);
                }
            }
            44..=46 => {
                let node = NODES[rng.usize(0..NODES.len())].to_string();
                if !self.slurm.foreign.remove(&node) {
                    self.slurm.foreign.insert(node);
                }
            }
            47..=49 => self.slurm.unreachable = !self.slurm.unreachable,
            50 => self.slurm.refuse_next = true,
            51..=52 => {
                // Someone cancels a job in Slurm.
                let live: Vec<u64> = self
                    .slurm
                    .jobs
                    .values()
                    .filter(|j| j.live())
                    .map(|j| j.id)
                    .collect();
                if !live.is_empty() {
                    self.slurm
                        .end(live[rng.usize(0..live.len())], "CANCELLED", self.now);
                }
            }
            _ => {
                self.now += rng.i64(100..3_000);
                self.slurm.tick(self.now, rng);
                self.handle(self.read());
            }
        }
    }
}

fn pick<'a, K, V>(map: &'a BTreeMap<K, V>, rng: &mut fastrand::Rng) -> Option<(&'a K, &'a V)> {
    (!map.is_empty()).then(|| map.iter().nth(rng.usize(0..map.len())).expect("in range"))
}

#[test]
fn seeded_runs_keep_the_gates_invariants() {
    for seed in 0..200u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut w = World::new();
        for step in 0..400 {
            w.step(&mut rng);
            w.check(seed, step);
        }
        // The faults stop; Slurm answers, nothing blocks, and the gate polls a while.
        w.slurm.unreachable = false;
        w.slurm.down.clear();
        w.slurm.foreign.clear();
        w.slurm.no_ends = true;
        for _ in 0..40 {
            w.now += 1_000;
            w.slurm.tick(w.now, &mut rng);
            w.handle(w.read());
            w.check(seed, 400);
        }
        let live: BTreeSet<(u64, u32)> = w.slurm.live_tags().into_keys().collect();
        let expected: BTreeSet<(u64, u32)> = w.model.expected.keys().copied().collect();
        assert_eq!(
            live,
            expected,
            "seed {seed}: what runs in Slurm is what labpool expects\nSlurm: {:#?}\ngate: {:#?}",
            w.slurm
                .jobs
                .values()
                .filter(|j| j.live()
                    || expected.contains(&crate::slurm_gate::queue::parse_tag(&j.comment).unwrap()))
                .collect::<Vec<_>>(),
            w.core.tracked()
        );
        for key in w
            .model
            .killed
            .iter()
            .filter(|k| !expected.contains(k) && !w.model.dropped.contains(k))
        {
            assert!(
                w.model.ends.contains_key(key) || !w.slurm.submits.contains_key(&tag(key.0, key.1)),
                "seed {seed}: the stopped attempt {key:?} never had its end reported"
            );
        }
        assert!(
            w.core.tracked().keys().all(|k| expected.contains(k)),
            "seed {seed}: the gate tracks only what labpool expects: {:?}",
            w.core.tracked().keys().collect::<Vec<_>>()
        );
    }
}

/// The start timeout counts from the release, and again from when Slurm answers after it did
/// not: a job held back by foreign load is cancelled and reported never started, once.
#[test]
fn a_released_job_that_slurm_does_not_start_is_placed_again_once() {
    let mut w = World::new();
    w.slurm.foreign.insert("n1".into());
    w.model.expected.insert((1, 1), "n1".into());
    w.order(GateOrder::Start(Box::new(submission(1, 1, "n1"))));
    w.now += START_TIMEOUT_MS - 1_000;
    w.slurm.unreachable = true;
    w.handle(w.read());
    w.slurm.unreachable = false;
    w.now += 5_000;
    w.handle(w.read());
    assert!(
        w.model.ends.is_empty(),
        "the clock restarted when Slurm answered again"
    );
    w.now += START_TIMEOUT_MS;
    w.handle(w.read());
    w.handle(w.read());
    assert_eq!(w.model.ends.get(&(1, 1)), Some(&1));
    assert!(w.slurm.live_tags().is_empty(), "it was cancelled in Slurm");
}
