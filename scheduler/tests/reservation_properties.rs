//! Property tests of reservations over random pools, bookings and job streams: bookings never
//! overlap on a GPU, a reservation's GPUs are free when it starts and held only by its own
//! jobs while it lasts, and a job in a reservation runs only on its GPUs, inside its window.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::reservation::ReservationRequest;
use labpool_scheduler::{JobId, JobSpec, JobState, Scheduler, Timestamp};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn pool(nodes: &[usize]) -> Scheduler {
    let mut s = sched();
    for (i, n) in nodes.iter().enumerate() {
        s.upsert_node(node(&format!("n{i}"), &vec!["t4"; *n], 64))
            .unwrap();
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn reservations_hold_their_gpus_for_their_own_jobs_only(
        nodes in prop::collection::vec(1usize..=4, 1..4),
        // (start hour, hours, GPUs)
        bookings in prop::collection::vec((0u64..20, 1u64..6, 1u32..=4), 0..6),
        // (submit hour, GPUs, run hours, limit hours, in reservation k, preemptible)
        jobs in prop::collection::vec((0u64..20, 1u32..=4, 1u64..5, 1u64..8, prop::option::weighted(0.3, 0usize..6), prop::bool::weighted(0.3)), 1..30),
    ) {
        let mut s = pool(&nodes);
        let max = *nodes.iter().max().unwrap() as u32;
        // Booked at time 0, some refused.
        let mut booked = Vec::new();
        for (k, (start, hours, gpus)) in bookings.iter().enumerate() {
            let req = ReservationRequest {
                name: format!("r{k}"),
                start: at(*start as f64),
                duration_s: hours * H,
                gpus: *gpus,
                node: None,
                users: BTreeSet::from(["demo".to_string()]),
                account: None,
            };
            if let Ok(r) = s.create_reservation(&req, Timestamp(0)) {
                booked.push(r);
            }
        }
        for (i, a) in booked.iter().enumerate() {
            for b in &booked[i + 1..] {
                if a.node == b.node && a.overlaps(b.start, b.end) {
                    prop_assert!(a.mask() & b.mask() == 0, "{} and {} share a GPU", a.name, b.name);
                }
            }
        }
        let mut arrivals: Vec<(Timestamp, JobSpec, u64)> = Vec::new();
        for (i, (t, gpus, run_h, limit_h, k, preemptible)) in jobs.iter().enumerate() {
            let limit = (*limit_h).max(*run_h);
            let mut spec = JobSpec { submit_time: at(*t as f64), preemptible: *preemptible, ..job(i as u64 + 1, "u", (*gpus).min(max), limit * H) };
            if let Some(r) = k.and_then(|k| booked.get(k)) {
                spec.user = "demo".into();
                spec.reservation = Some(r.name.clone());
                spec.resources.gpus = spec.resources.gpus.min(r.gpus.len() as u32);
                if s.check_reservation(&spec, &r.name).is_err() {
                    continue;
                }
            }
            arrivals.push((spec.submit_time, spec, run_h * H));
        }
        let runtime: BTreeMap<u64, u64> = arrivals.iter().map(|(_, j, r)| (j.id.0, *r)).collect();
        arrivals.sort_by_key(|(t, j, _)| (*t, j.id));
        arrivals.reverse();
        let grace = s.policy().preemption.grace_s;
        // Jobs told to stop, and when their grace ends.
        let mut stopping: BTreeMap<JobId, Timestamp> = BTreeMap::new();
        let mut now = Timestamp(0);
        for _ in 0..2_000 {
            let stop: Vec<JobId> = stopping.iter().filter(|(_, t)| **t <= now).map(|(j, _)| *j).collect();
            for id in stop {
                stopping.remove(&id);
                s.requeue(id);
            }
            let ending: Vec<JobId> = s.running().filter(|(j, a)| a.start.plus_secs(runtime[&j.id.0]) <= now && !stopping.contains_key(&j.id)).map(|(j, _)| j.id).collect();
            for id in ending {
                s.finish(id, JobState::Completed, now);
            }
            while arrivals.last().is_some_and(|(t, _, _)| *t <= now) {
                s.enqueue(arrivals.pop().unwrap().1);
            }
            for d in s.schedule(now) {
                if let labpool_scheduler::Decision::Preempt { job, .. } = d {
                    let (spec, _) = s.running().find(|(j, _)| j.id == job).unwrap();
                    prop_assert!(spec.preemptible && spec.reservation.is_none(), "job {} may not be preempted", job);
                    stopping.insert(job, now.plus_secs(grace));
                }
            }
            s.check_invariants().map_err(TestCaseError::fail)?;
            for (j, a) in s.running() {
                for r in &booked {
                    let inside = j.reservation.as_deref() == Some(r.name.as_str());
                    if inside {
                        prop_assert!(a.node == r.node && a.gpus.iter().all(|g| r.gpus.contains(g)), "job {} outside its reservation", j.id);
                        prop_assert!(a.start >= r.start && a.start.plus_limit(j.time_limit) <= r.end, "job {} outside {}'s window", j.id, r.name);
                    } else if a.node == r.node && now >= r.start && now < r.end {
                        prop_assert!(a.gpus.iter().all(|g| !r.gpus.contains(g)), "job {} holds a GPU of {} at {:?}", j.id, r.name, now);
                    }
                }
            }
            let next = [
                arrivals.last().map(|(t, _, _)| *t),
                s.running().map(|(j, a)| a.start.plus_secs(runtime[&j.id.0])).min(),
                booked.iter().flat_map(|r| [Timestamp(r.start.0 - grace as i64 * 1000), r.start, r.end]).filter(|t| *t > now).min(),
                stopping.values().min().copied(),
            ].into_iter().flatten().min();
            match next {
                Some(t) => now = t.max(Timestamp(now.0 + 1)),
                None => break,
            }
        }
    }
}
