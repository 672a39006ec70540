//! Seeded random event sequences through the harness, with the invariants checked after every
//! step: no GPU held twice, memory and store agree, every job ends exactly once, no fenced
//! attempt runs on a reachable node, the ledger balances. A failing seed prints `SEED=`; add it
//! to `REGRESSION_SEEDS` once fixed.

#[allow(dead_code)] // each test binary uses part of the harness
mod harness;

use harness::Harness;
use labpool_lifecycle::{Event, Outcome, Readiness};
use labpool_scheduler::JobState;

/// Seeds that once broke an invariant, kept as regression tests.
const REGRESSION_SEEDS: &[u64] = &[];

/// Seeds run on every test run, besides the regressions.
const SEEDS: u64 = 300;

/// Steps of random events per seed.
const STEPS: usize = 400;

/// SplitMix64: small, seeded, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        (!items.is_empty()).then(|| items[self.below(items.len())].clone())
    }
}

fn readiness(rng: &mut Rng) -> Readiness {
    match rng.below(3) {
        0 => Harness::ready(),
        1 => Harness::data_stage(),
        _ => Harness::env_stage(),
    }
}

fn pending(h: &Harness) -> Vec<u64> {
    h.life
        .jobs()
        .filter(|(_, l)| l.state == JobState::Pending)
        .map(|(id, _)| *id)
        .collect()
}

/// (node, job, attempt) for each attempt in the chosen set of up nodes.
fn on_up_nodes(h: &Harness, staging: bool) -> Vec<(String, u64, u32)> {
    h.nodes
        .iter()
        .filter(|(_, n)| n.up)
        .flat_map(|(name, n)| {
            let set = if staging { &n.staging } else { &n.running };
            set.iter().map(move |(j, a)| (name.clone(), *j, *a))
        })
        .collect()
}

fn step(h: &mut Harness, rng: &mut Rng) {
    h.now += rng.below(120_000) as i64;
    let nodes: Vec<String> = h.nodes.keys().cloned().collect();
    match rng.below(21) {
        0..=3 => {
            let requeue = rng.below(4) != 0;
            h.submit(requeue);
        }
        4..=7 => {
            if let (Some(job), Some(node)) = (rng.pick(&pending(h)), rng.pick(&nodes)) {
                let gpus = 1 + rng.below(2) as u32;
                let ready = readiness(rng);
                h.place(job, &node, gpus, ready);
            }
        }
        8..=10 => {
            if let Some((_, job, attempt)) = rng.pick(&on_up_nodes(h, true)) {
                let e = match rng.below(6) {
                    0 => Event::StageFailed {
                        job,
                        attempt,
                        why: "no room".into(),
                        retry: Some("CacheFull".into()),
                    },
                    1 => Event::StageFailed {
                        job,
                        attempt,
                        why: "source gone".into(),
                        retry: None,
                    },
                    2 => Event::StageProgress {
                        job,
                        attempt,
                        detail: "50%".into(),
                    },
                    _ => Event::Staged {
                        job,
                        attempt,
                        notes: vec!["copied".into()],
                        next: if rng.below(3) == 0 {
                            Harness::env_stage()
                        } else {
                            Harness::ready()
                        },
                    },
                };
                h.nodes.values_mut().for_each(|n| {
                    n.staging.remove(&(job, attempt));
                });
                h.event(e);
            }
        }
        11..=13 => {
            if let Some((node, job, attempt)) = rng.pick(&on_up_nodes(h, false)) {
                let state = if rng.below(4) == 0 {
                    JobState::Failed
                } else {
                    JobState::Completed
                };
                h.finish(&node, job, attempt, state);
            }
        }
        14 => {
            let ids: Vec<u64> = h.life.jobs().map(|(id, _)| *id).collect();
            if let Some(job) = rng.pick(&ids) {
                h.event(if rng.below(2) == 0 {
                    Event::Cancel {
                        job,
                        by: "alice".into(),
                    }
                } else {
                    Event::Preempt {
                        job,
                        by: 9999,
                        cause: "test".into(),
                    }
                });
                let node = h.store[&job].node.clone();
                if let Some(node) = node {
                    h.flush(&node);
                }
            }
        }
        15 => {
            let up: Vec<String> = h
                .nodes
                .iter()
                .filter(|(_, n)| n.up)
                .map(|(k, _)| k.clone())
                .collect();
            if let Some(node) = rng.pick(&up) {
                h.cut(&node);
            }
        }
        16 => {
            let down: Vec<String> = h
                .nodes
                .iter()
                .filter(|(_, n)| !n.up)
                .map(|(k, _)| k.clone())
                .collect();
            if let Some(node) = rng.pick(&down) {
                h.heal(&node);
            }
        }
        17 => {
            if let Some((node, job, attempt)) = rng.pick(&on_up_nodes(h, false)) {
                h.nodes
                    .get_mut(&node)
                    .unwrap()
                    .running
                    .remove(&(job, attempt));
                h.event(Event::NeverStarted {
                    node,
                    job,
                    attempt,
                    why: None,
                });
            }
        }
        18 => h.restart(),
        19 => {
            // A node that does not run the current attempt speaks for it (an end, or a lost
            // start): refused, so the real one keeps running and is not fenced.
            if let Some((runs_on, job, attempt)) = rng.pick(&on_up_nodes(h, false)) {
                let others: Vec<String> =
                    nodes.iter().filter(|n| **n != runs_on).cloned().collect();
                if let Some(node) = rng.pick(&others) {
                    let e = if rng.below(2) == 0 {
                        Event::Ended {
                            node,
                            job,
                            attempt,
                            outcome: Outcome::decided(JobState::Completed, h.now, "forged".into()),
                        }
                    } else {
                        Event::NeverStarted {
                            node,
                            job,
                            attempt,
                            why: None,
                        }
                    };
                    h.event(e);
                    assert_eq!(
                        h.attempt_of(job),
                        (attempt, Some(runs_on.clone())),
                        "a report from another node moved job {job}"
                    );
                }
            }
        }
        _ => {
            // A stale end for an old attempt of some job, from some node.
            let ids: Vec<u64> = h.store.keys().copied().collect();
            if let (Some(job), Some(node)) = (rng.pick(&ids), rng.pick(&nodes)) {
                let attempt = h.store[&job].attempt.saturating_sub(1);
                h.event(Event::Ended {
                    node,
                    job,
                    attempt,
                    outcome: Outcome::decided(JobState::Completed, h.now, "late".into()),
                });
            }
        }
    }
}

/// Brings every job to an end: nodes back, everything placed, staged and finished.
fn drain(h: &mut Harness) {
    let nodes: Vec<String> = h.nodes.keys().cloned().collect();
    for node in &nodes {
        if !h.nodes[node].up {
            h.heal(node);
        }
    }
    for _ in 0..10_000 {
        if h.life.is_empty() {
            return;
        }
        h.now += 1_000;
        for job in pending(h) {
            for node in &nodes {
                if h.place(job, node, 1, Harness::ready()) {
                    break;
                }
            }
        }
        for (_, job, attempt) in on_up_nodes(h, true) {
            h.nodes.values_mut().for_each(|n| {
                n.staging.remove(&(job, attempt));
            });
            h.event(Event::Staged {
                job,
                attempt,
                notes: vec![],
                next: Harness::ready(),
            });
        }
        for (node, job, attempt) in on_up_nodes(h, false) {
            h.finish(&node, job, attempt, JobState::Completed);
        }
        // A staging job whose stage order was lost in a restart is staged again here.
        let stuck: Vec<(u64, u32)> = h
            .life
            .jobs()
            .filter(|(_, l)| l.state == JobState::Staging)
            .map(|(id, l)| (*id, l.attempt))
            .collect();
        for (job, attempt) in stuck {
            h.event(Event::Staged {
                job,
                attempt,
                notes: vec![],
                next: Harness::ready(),
            });
        }
        h.check().expect("invariants while draining");
    }
    panic!("jobs left after draining: {}", h.life.len());
}

fn run(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let mut h = Harness::new(3, 2);
    for i in 0..STEPS {
        step(&mut h, &mut rng);
        h.check()
            .map_err(|e| format!("SEED={seed} step {i}: {e}"))?;
    }
    drain(&mut h);
    h.check()
        .map_err(|e| format!("SEED={seed} after draining: {e}"))?;
    h.all_ended_once().map_err(|e| format!("SEED={seed}: {e}"))
}

#[test]
fn seeded_sequences_keep_the_invariants() {
    let failures: Vec<String> = REGRESSION_SEEDS
        .iter()
        .copied()
        .chain(0..SEEDS)
        .filter_map(|seed| run(seed).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_same_seed_gives_the_same_effects() {
    let effects = |seed| {
        let mut rng = Rng(seed);
        let mut h = Harness::new(3, 2);
        for _ in 0..STEPS {
            step(&mut h, &mut rng);
        }
        format!("{:?}", h.effects)
    };
    assert_eq!(effects(42), effects(42));
    assert_ne!(effects(42), effects(43));
}
