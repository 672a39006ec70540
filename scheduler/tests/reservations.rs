//! Reservations in the core: GPUs chosen at booking and never double-booked, other jobs kept
//! off them over the window unless they end before it, and jobs submitted into one run only
//! there, from its start.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::reservation::{Reservation, ReservationRequest};
use labpool_scheduler::{Decision, JobId, JobSpec, Scheduler};
use std::collections::BTreeSet;

fn request(name: &str, start_h: f64, hours: u64, gpus: u32) -> ReservationRequest {
    ReservationRequest {
        name: name.into(),
        start: at(start_h),
        duration_s: hours * H,
        gpus,
        node: None,
        users: BTreeSet::from(["demo".to_string()]),
        account: None,
    }
}

fn pool() -> Scheduler {
    let mut s = sched();
    s.upsert_node(node("n1", &["t4"; 4], 16)).unwrap();
    s.upsert_node(node("n2", &["t4"; 4], 16)).unwrap();
    s
}

fn in_reservation(id: u64, user: &str, gpus: u32, limit_s: u64, r: &str) -> JobSpec {
    JobSpec {
        reservation: Some(r.into()),
        ..job(id, user, gpus, limit_s)
    }
}

#[test]
fn reservations_get_their_own_gpus_and_are_never_double_booked() {
    let mut s = pool();
    let a = s
        .create_reservation(&request("a", 2.0, 4, 3), at(0.0))
        .unwrap();
    assert_eq!((a.node.as_str(), a.gpus.clone()), ("n1", vec![0, 1, 2]));
    // Overlapping: the one GPU left on n1 is too few, so n2.
    let b = s
        .create_reservation(&request("b", 3.0, 4, 2), at(0.0))
        .unwrap();
    assert_eq!((b.node.as_str(), b.gpus.clone()), ("n2", vec![0, 1]));
    let err = s
        .create_reservation(&request("c", 4.0, 1, 3), at(0.0))
        .unwrap_err();
    assert!(err.to_string().contains("no node has 3 GPUs free"), "{err}");
    // After a's window, its GPUs are free again.
    let d = s
        .create_reservation(&request("d", 6.0, 1, 4), at(0.0))
        .unwrap();
    assert_eq!(d.node, "n1");
    // Every problem at once, and nothing booked.
    let mut bad = request("a", -1.0, 0, 0);
    bad.users.clear();
    let err = s.create_reservation(&bad, at(0.0)).unwrap_err().to_string();
    for part in ["exists", "duration", "--gpus", "past", "--users"] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert_eq!(s.reservations().count(), 3);
    // `--start now`, read a moment before the booking, starts now.
    let mut now = request("now", 8.0, 1, 1);
    now.start = at(8.0);
    let r = s.create_reservation(&now, at(8.0).plus_secs(5)).unwrap();
    assert_eq!(r.start, at(8.0).plus_secs(5));
}

#[test]
fn a_reservation_avoids_gpus_that_running_jobs_hold_past_its_start() {
    let mut s = pool();
    s.enqueue(job(1, "u", 4, 10 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    let r = s
        .create_reservation(&request("r", 2.0, 1, 4), at(0.0))
        .unwrap();
    assert_eq!(r.node, "n2", "n1's GPUs are held for 10 h");
}

#[test]
fn other_jobs_use_reserved_gpus_only_if_they_end_before_the_window() {
    let mut s = pool();
    let mut req = request("r", 2.0, 4, 4);
    req.node = Some("n1".into());
    s.create_reservation(&req, at(0.0)).unwrap();
    s.set_node_drain("n2", Some("test".into()));
    s.enqueue(job(1, "u", 1, 3 * H));
    s.enqueue(job(2, "u", 1, H));
    let d = s.schedule(at(0.0));
    assert_eq!(
        ids(&d),
        [2],
        "the 1 h job ends before the window; the 3 h job would not"
    );
    // After the window the 3 h job runs.
    end(&mut s, 2, at(1.0));
    assert!(ids(&s.schedule(at(3.0))).is_empty());
    assert_eq!(ids(&s.schedule(at(6.0))), [1]);
}

#[test]
fn a_job_in_a_reservation_waits_for_its_start_and_runs_only_there() {
    let mut s = pool();
    let r: Reservation = s
        .create_reservation(&request("r", 2.0, 4, 2), at(0.0))
        .unwrap();
    s.enqueue(in_reservation(1, "demo", 2, 2 * H, "r"));
    s.enqueue(in_reservation(2, "stranger", 1, H, "r"));
    s.enqueue(in_reservation(3, "demo", 1, 5 * H, "r"));
    s.schedule(at(0.0));
    assert_eq!(code(&s, 1), "Reservation");
    assert_eq!(code(&s, 2), "InvalidReservation");
    let d = s.schedule(at(2.0));
    assert_eq!(started(&d)[&1], (r.node.clone(), r.gpus.clone()));
    assert!(
        reason(&s, 3).contains("no longer fits"),
        "{}",
        reason(&s, 3)
    );
    // Submit-time checks name every problem.
    let err = s
        .check_reservation(&in_reservation(9, "stranger", 3, 5 * H, "r"), "r")
        .unwrap_err()
        .to_string();
    for part in [
        "may not use",
        "asks for 3 GPUs",
        "longer than reservation r",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(
        s.check_reservation(&in_reservation(9, "demo", 1, H, "r"), "r")
            .is_ok()
    );
    // Ended reservations go; their waiting jobs are told.
    assert_eq!(s.expire_reservations(at(6.0)), ["r"]);
    s.schedule(at(6.0));
    assert_eq!(code(&s, 3), "InvalidReservation");
    assert!(s.job(JobId(1)).is_some());
    s.check_invariants().unwrap();
}

#[test]
fn preemptible_jobs_use_reserved_gpus_until_a_grace_before_the_window() {
    let mut s = sched();
    s.upsert_node(node("n1", &["t4"; 4], 16)).unwrap();
    s.create_reservation(&request("r", 2.0, 4, 4), at(0.0))
        .unwrap();
    s.enqueue(JobSpec {
        preemptible: true,
        ..job(1, "u", 4, 10 * H)
    });
    s.enqueue(job(2, "u", 1, 10 * H));
    assert_eq!(
        ids(&s.schedule(at(0.0))),
        [1],
        "only the preemptible job may"
    );
    // Nothing is told before the window is a grace away; then the job is, whatever its age.
    let grace = s.policy().preemption.grace_s as f64 / 3600.0;
    assert_eq!(
        s.next_due(at(1.0)),
        Some(at(2.0 - grace)),
        "a pass is due then"
    );
    assert!(
        !s.schedule(at(1.0))
            .iter()
            .any(|d| matches!(d, Decision::Preempt { .. }))
    );
    let d = s.schedule(at(2.0 - grace));
    let told: Vec<(u64, u64)> = d
        .iter()
        .filter_map(|d| match d {
            Decision::Preempt { job, by, .. } => Some((job.0, by.0)),
            _ => None,
        })
        .collect();
    assert_eq!(told, [(1, 0)], "preempted for the reservation (job 0)");
    assert!(s.requeue(JobId(1)));
    s.enqueue(in_reservation(3, "demo", 4, H, "r"));
    assert_eq!(ids(&s.schedule(at(2.0))), [3]);
    s.check_invariants().unwrap();
}
