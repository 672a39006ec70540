//! Reservations and backfill: a job fills a hole only where it does not delay the reserved one.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::JobId;

#[test]
fn backfill_fills_holes_without_delaying_the_reserved_job() {
    // 5 GPUs. Job 1 holds 3 GPUs for 2 h. Job 2 wants all 5: it is reserved for t = 2 h.
    // Job 3 (1 GPU, 1 h) fits in the hole and ends before 2 h: it backfills.
    // Job 4 (1 GPU, 3 h) would still run at 2 h and delay job 2: it waits (Priority), though a
    // GPU is free.
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 5], 16)).unwrap();
    s.enqueue(job(1, "u", 3, 2 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    s.enqueue(job(2, "u", 5, H));
    s.enqueue(job(3, "u", 1, H));
    s.enqueue(job(4, "u", 1, 3 * H));
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [3]);
    assert_eq!(code(&s, 2), "Resources");
    assert!(
        reason(&s, 2).contains("reserved on box"),
        "{}",
        reason(&s, 2)
    );
    assert_eq!(code(&s, 4), "Priority");
    assert!(
        reason(&s, 4).contains("1 reserved; held for higher-priority jobs: box for job 2"),
        "{}",
        reason(&s, 4)
    );
    let why = s.explain(JobId(2)).unwrap();
    assert_eq!(why.reservation, Some(("box".to_string(), at(2.0))));
    assert_eq!(why.stage, "placement");
    // Job 1 ends on time; job 2 starts then, job 4 still waits behind it.
    end(&mut s, 3, at(1.0));
    end(&mut s, 1, at(2.0));
    assert_eq!(ids(&s.schedule(at(2.0))), [2]);
    s.check_invariants().unwrap();
}
