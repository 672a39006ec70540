//! A pass after jobs were only added gives exactly what a full pass gives: the same starts,
//! the same waits, and the same notes for every waiting job, whether it took the shortcut or
//! fell back to a full pass.

#[allow(dead_code)] // each test binary uses part of the helpers
mod common;

use common::{H, job, node, partition};
use labpool_scheduler::policy::{PlacementPolicy, Policy};
use labpool_scheduler::{Decision, JobSpec, Scheduler, Timestamp};
use proptest::prelude::*;

/// A pool of `nodes` nodes with 4 GPUs each, `first` jobs queued, and one full pass at `now`.
/// Few reservations (3), so that many cases reach jobs that wait without one.
fn pool(nodes: usize, first: &[JobSpec], now: Timestamp) -> (Scheduler, Vec<Decision>) {
    let policy = Policy {
        placement: PlacementPolicy {
            max_reservations: 3,
            ..PlacementPolicy::default()
        },
        ..Policy::default()
    };
    let partitions = vec![
        partition("normal", true, 0, 86_400),
        partition("high", false, 10, H),
    ];
    let mut s = Scheduler::with_policy(partitions, policy).unwrap();
    for i in 0..nodes {
        s.upsert_node(node(&format!("n{i}"), &["a100"; 4], 64))
            .unwrap();
    }
    for j in first {
        s.enqueue(j.clone());
    }
    let d = s.schedule(now);
    // A second pass starts nothing new, so the next pass may take the shortcut.
    s.schedule(now);
    (s, d)
}

fn notes(s: &Scheduler, jobs: &[JobSpec]) -> Vec<String> {
    jobs.iter()
        .map(|j| format!("{:?}", s.explain(j.id)))
        .collect()
}

type Spec = (usize, u32, u64);

/// An added job: its spec, and whether it goes to the high-priority partition.
type Added = (usize, u32, u64, bool);

/// One case: nodes, jobs queued first, jobs added.
type Case = (usize, Vec<Spec>, Vec<Added>);

/// One case: `first` queued and passed, then `added` queued; the shortcut against a full pass.
/// Returns whether the shortcut was taken.
fn case(nodes: usize, first: Vec<Spec>, added: Vec<Added>) -> Result<bool, TestCaseError> {
    let users = ["ann", "bob", "cy"];
    let mk = |k: usize, (u, g, h): Spec| job(k as u64 + 1, users[u], g, h * 3600);
    let first: Vec<JobSpec> = first
        .into_iter()
        .enumerate()
        .map(|(k, x)| mk(k, x))
        .collect();
    // Some added jobs go to the high-priority partition: they sort before older jobs.
    let more: Vec<JobSpec> = added
        .into_iter()
        .enumerate()
        .map(|(k, (u, g, h, high))| {
            let mut j = mk(first.len() + k, (u, g, h));
            if high {
                j.partition = "high".into();
            }
            j
        })
        .collect();
    let now = Timestamp(1_000_000);
    let (mut quick, _) = pool(nodes, &first, now);
    let (mut full, _) = pool(nodes, &first, now);
    for j in &more {
        quick.enqueue(j.clone());
        full.enqueue(j.clone());
    }
    let ids: Vec<_> = more.iter().map(|j| j.id).collect();
    let before = quick.full_passes();
    let a = quick.schedule_appended(now, &labpool_scheduler::cache_view::NoCache, &ids);
    let b = full.schedule(now);
    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let all: Vec<JobSpec> = first.iter().chain(&more).cloned().collect();
    let (nq, nf) = (notes(&quick, &all), notes(&full, &all));
    if let Some(k) = (0..nq.len()).find(|k| nq[*k] != nf[*k]) {
        prop_assert!(false, "job {}: shortcut {} / full {}", k + 1, nq[k], nf[k]);
    }
    quick.check_invariants().unwrap();
    Ok(quick.full_passes() == before)
}

/// The cases: 1 or 2 nodes, up to 140 jobs queued, then 1 to 19 added.
fn cases() -> impl Strategy<Value = Case> {
    (
        1usize..3,
        prop::collection::vec((0usize..3, 1u32..5, 1u64..48), 0..140),
        prop::collection::vec(
            (0usize..3, 1u32..5, 1u64..48, prop::bool::weighted(0.2)),
            1..20,
        ),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn appended_pass_equals_a_full_pass((nodes, first, added) in cases()) {
        case(nodes, first, added)?;
    }
}

#[test]
fn the_property_exercises_the_shortcut() {
    // The same cases from a fixed seed: enough of them must take the shortcut, or the property
    // above would only ever test the fallback.
    use std::sync::atomic::{AtomicU32, Ordering};
    let (took, total) = (AtomicU32::new(0), AtomicU32::new(0));
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    runner
        .run(&cases(), |(nodes, first, added)| {
            total.fetch_add(1, Ordering::Relaxed);
            if case(nodes, first, added)? {
                took.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
        .unwrap();
    let (took, total) = (took.into_inner(), total.into_inner());
    eprintln!("{took} of {total} cases took the shortcut");
    assert!(
        took * 8 >= total,
        "{took} of {total} cases took the shortcut"
    );
}

#[test]
fn a_deep_queue_takes_the_shortcut() {
    // 300 one-GPU jobs behind a job holding every GPU: reservations run out after 3, so the
    // next job waits on the failed shape and the shortcut needs no full pass.
    let now = Timestamp(1_000_000);
    let mut first = vec![job(1, "ann", 4, 36_000)];
    first.extend((2..=300).map(|i| job(i, "ann", 1, 3_600)));
    let (mut s, d) = pool(1, &first, now);
    assert_eq!(
        d.iter()
            .filter(|d| matches!(d, Decision::Start { .. }))
            .count(),
        1
    );
    // The pass after a start numbers the queue anew (a full pass); the one after that can
    // take the shortcut.
    s.schedule(now);
    let full = s.full_passes();
    s.enqueue(job(301, "ann", 1, 3_600));
    let d = s.schedule_appended(
        now,
        &labpool_scheduler::cache_view::NoCache,
        &[job(301, "ann", 1, 3600).id],
    );
    assert_eq!(d.len(), 1, "only the new job's reason: {d:?}");
    assert_eq!(s.full_passes(), full, "no full pass ran");
    let note = s.explain(job(301, "ann", 1, 3600).id).unwrap();
    assert_eq!(note.position, 300, "after the 299 jobs waiting before it");
    assert_eq!(note.reason.code, "Resources");
    // The job before it still has its note from the full pass.
    assert_eq!(
        s.explain(job(300, "ann", 1, 3600).id).unwrap().position,
        299
    );
}
