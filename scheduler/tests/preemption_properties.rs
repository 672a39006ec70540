//! Property tests of preemption over random clusters and job streams, driven as the daemon
//! drives the core: a notice is followed by the job's requeue when its grace ends. After every
//! pass: no job that may not be preempted is, none within its minimum runtime, the books hold;
//! at the end every job, preempted or not, has run to completion, and the GPU time charged
//! adds up to the attempts' own.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::policy::{Account, Limits};
use labpool_scheduler::{Decision, JobId, JobSpec, JobState, Scheduler, TimeLimit, Timestamp};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// (user, gpus, runtime in minutes, preemptible, emergency, interactive, minutes to the next)
type Submit = (usize, u32, u64, bool, bool, bool, u64);

fn submit() -> impl Strategy<Value = Submit> {
    (
        0usize..4,
        1u32..=3,
        5u64..300,
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.1),
        0u64..60,
    )
}

/// ann and ben share account a (GrpTRES 2, BorrowLimit 4); cy is in b (GrpTRES 4); di is
/// overdrawn.
const USERS: [&str; 4] = ["ann", "ben", "cy", "di"];
const GRACE_S: u64 = 120;
const MIN_RUN_S: u64 = 600;

fn pool(nodes: &[usize]) -> Scheduler {
    let mut s = sched();
    for (i, n) in nodes.iter().enumerate() {
        s.upsert_node(node(&format!("n{i}"), &vec!["t4"; *n], 64))
            .unwrap();
    }
    let mut a = Limits::default();
    a.apply(&["GrpTRES=gres/gpu=2", "BorrowLimit=gres/gpu=4"])
        .unwrap();
    let members = |u: &[&str]| u.iter().map(|s| s.to_string()).collect();
    s.set_account(
        "a",
        Account {
            members: members(&["ann", "ben"]),
            limits: a,
        },
    );
    let mut b = Limits::default();
    b.apply(&["GrpTRES=gres/gpu=4"]).unwrap();
    s.set_account(
        "b",
        Account {
            members: members(&["cy"]),
            limits: b,
        },
    );
    s.set_balance("di", -1.0);
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn preemption_is_safe_and_every_job_completes(
        nodes in prop::collection::vec(1usize..=4, 1..4),
        jobs in prop::collection::vec(submit(), 1..40),
    ) {
        let mut s = pool(&nodes);
        let max_gpus = *nodes.iter().max().unwrap() as u32;
        let mut now = Timestamp(0);
        let mut arrivals: Vec<(Timestamp, JobSpec, u64)> = Vec::new();
        let mut t = 0u64;
        for (i, (user, gpus, run_min, preemptible, emergency, interactive, gap)) in jobs.iter().enumerate() {
            let user = USERS[*user];
            let account = match user { "ann" | "ben" => Some("a".to_string()), "cy" => Some("b".to_string()), _ => None };
            let spec = JobSpec {
                account,
                preemptible: *preemptible,
                emergency: *emergency,
                interactive: *interactive,
                time_limit: TimeLimit::Seconds(run_min * 60 + 600),
                submit_time: Timestamp((t * 60_000) as i64),
                ..job(i as u64 + 1, user, (*gpus).min(max_gpus), 0)
            };
            arrivals.push((spec.submit_time, spec, run_min * 60));
            t += gap;
        }
        let runtime: BTreeMap<u64, u64> = arrivals.iter().map(|(_, j, r)| (j.id.0, *r)).collect();
        let total = arrivals.len();
        arrivals.reverse();
        let mut completed: BTreeSet<u64> = BTreeSet::new();
        // Victim → when its grace ends.
        let mut stopping: BTreeMap<JobId, Timestamp> = BTreeMap::new();
        let mut charged_s: f64 = 0.0;
        let mut attempts_s: f64 = 0.0;
        let mut preempted: BTreeSet<u64> = BTreeSet::new();
        let gpus_of = |s: &Scheduler, id: JobId| s.job(id).unwrap().resources.total_gpus() as f64;
        for _ in 0..5_000 {
            while arrivals.last().is_some_and(|(at, _, _)| *at <= now) {
                let (_, spec, _) = arrivals.pop().unwrap();
                s.enqueue(spec);
            }
            let borrowing_before = s.borrowing();
            for d in s.schedule(now) {
                if let Decision::Preempt { job, by, .. } = d {
                    let (spec, alloc) = s.running().find(|(j, _)| j.id == job).unwrap();
                    prop_assert!(!spec.emergency && !spec.interactive, "job {} may never be preempted", job);
                    let overdrawn = spec.user == "di";
                    prop_assert!(spec.preemptible || overdrawn || borrowing_before.contains(&job),
                        "job {} ({}) preempted by {} but it is in credit within its share", job, spec.user, by);
                    prop_assert!(now.secs_since(alloc.start) >= MIN_RUN_S, "job {} preempted within its minimum runtime", job);
                    prop_assert!(stopping.insert(job, now.plus_secs(GRACE_S)).is_none(), "job {} told twice", job);
                    preempted.insert(job.0);
                }
            }
            s.check_invariants().map_err(TestCaseError::fail)?;
            // Ends and stops due now: requeued victims run again from the start.
            let due: Vec<(JobId, bool)> = s
                .running()
                .filter_map(|(j, a)| {
                    if stopping.get(&j.id).is_some_and(|t| *t <= now) {
                        Some((j.id, false))
                    } else {
                        (a.start.plus_secs(runtime[&j.id.0]) <= now).then_some((j.id, true))
                    }
                })
                .collect();
            for (id, done) in due {
                let start = s.running().find(|(j, _)| j.id == id).unwrap().1.start;
                attempts_s += gpus_of(&s, id) * now.secs_since(start) as f64;
                let (spec, alloc) = s.running().find(|(j, _)| j.id == id).unwrap();
                // Half price only where preemption is possible: an emergency job or a session
                // pays in full whatever it asked for.
                let shielded = spec.emergency || spec.interactive || spec.reservation.is_some();
                let rate = if spec.preemptible && !shielded { 0.5 } else { 1.0 };
                charged_s += s.charge_for(spec, alloc, now) * 3600.0 / rate;
                stopping.remove(&id);
                if done {
                    s.finish(id, JobState::Completed, now);
                    completed.insert(id.0);
                } else {
                    prop_assert!(s.requeue(id));
                }
            }
            let next = [
                arrivals.last().map(|(t, _, _)| *t),
                s.running().map(|(j, a)| a.start.plus_secs(runtime[&j.id.0])).min(),
                stopping.values().min().copied(),
                // Preemption becomes possible once the minimum runtime has passed.
                s.running().map(|(_, a)| a.start.plus_secs(MIN_RUN_S)).filter(|t| *t > now).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) => now = t.max(Timestamp(now.0 + 1)),
                None if s.pending().count() == 0 => break,
                None => now = now.plus_secs(60),
            }
        }
        prop_assert_eq!(completed.len(), total, "every job completes; preempted: {:?}, waiting: {:?}",
            preempted, s.pending().map(|j| j.id.0).collect::<Vec<_>>());
        prop_assert!((charged_s - attempts_s).abs() < 1e-6 * attempts_s.max(1.0),
            "charged {} GPU-s for {} GPU-s run", charged_s, attempts_s);
    }
}
