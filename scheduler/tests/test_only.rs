//! `--test-only`: the prediction is the pass's own decision, made on a copy, and the real
//! scheduler is left as it was.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::JobId;
use labpool_scheduler::cache_view::NoCache;

#[test]
fn a_job_that_fits_now_would_start_now_and_one_that_does_not_at_its_reservation() {
    let mut s = sched();
    s.upsert_node(node("a", &["t4"; 2], 16)).unwrap();
    s.upsert_node(node("b", &["t4"; 2], 16)).unwrap();
    s.enqueue(job(1, "u", 2, 2 * H));
    s.enqueue(job(2, "u", 1, 3 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1, 2]);

    // One GPU is free, on b.
    let p = s.test_only(at(0.5), &NoCache, job(10, "v", 1, H));
    assert_eq!(p.start, Some(at(0.5)));
    assert_eq!(p.node.as_deref(), Some("b"));
    assert_eq!(p.reason, None);

    // Two GPUs: a frees at 2 h (job 1's limit), before b at 3 h.
    let p = s.test_only(at(0.5), &NoCache, job(11, "v", 2, H));
    assert_eq!(p.start, Some(at(2.0)));
    assert_eq!(p.node.as_deref(), Some("a"));
    assert_eq!(p.reason.unwrap().code, "Resources");

    // Nothing was queued or changed: the free GPU still goes to the next real job.
    assert!(s.job(JobId(10)).is_none() && s.job(JobId(11)).is_none());
    assert_eq!(s.pending().count(), 0);
    s.enqueue(job(3, "u", 1, H));
    assert_eq!(started(&s.schedule(at(0.5)))[&3].0, "b");
    s.check_invariants().unwrap();
}

#[test]
fn a_held_job_has_no_start_time_and_says_why() {
    let mut s = sched();
    s.upsert_node(node("a", &["t4"; 2], 16)).unwrap();
    let mut j = job(5, "u", 1, H);
    j.hold = Some(labpool_scheduler::HoldBy::User);
    let p = s.test_only(at(0.0), &NoCache, j);
    assert_eq!(p.start, None);
    assert_eq!(p.reason.unwrap().code, "JobHeldUser");
}
