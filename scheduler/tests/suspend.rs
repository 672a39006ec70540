//! Suspended jobs: an idle session's GPU goes back to the pool while its processes live on,
//! and the same GPU comes back to it once its owner returns and the GPU is free; the span it
//! was suspended is not charged.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::scheduler::suspend::SuspendError;
use labpool_scheduler::{JobId, JobState, Timestamp};

/// One node of two RTX 4090s, with `jobs` (id, GPUs) started at `t`.
fn running(jobs: &[(u64, u32)], t: i64) -> labpool_scheduler::Scheduler {
    let mut s = sched();
    s.upsert_node(node("n1", &["rtx4090", "rtx4090"], 8))
        .unwrap();
    for (id, gpus) in jobs {
        s.enqueue(job(*id, "alice", *gpus, H));
    }
    let d = s.schedule(Timestamp(t));
    assert_eq!(ids(&d).len(), jobs.len(), "{d:?}");
    s
}

#[test]
fn a_suspended_job_frees_its_gpu_and_takes_the_same_one_back_when_it_is_free() {
    let mut s = running(&[(1, 1)], 0);
    let gpu = s.allocation(JobId(1)).unwrap().gpus.clone();
    assert_eq!(s.suspend(JobId(1), Timestamp(10_000)), Ok(gpu.clone()));
    assert_eq!(
        s.suspend(JobId(1), Timestamp(10_000)),
        Err(SuspendError::AlreadySuspended(JobId(1)))
    );
    assert!(s.allocation(JobId(1)).unwrap().gpus.is_empty());
    s.check_invariants().unwrap();
    // Another job takes both GPUs, the freed one included.
    s.enqueue(job(2, "bob", 2, H));
    assert_eq!(ids(&s.schedule(Timestamp(11_000))), [2]);
    s.check_invariants().unwrap();
    // Its owner is back, but its GPU is held: it waits.
    assert!(s.want_back(JobId(1)));
    assert!(s.take_back(Timestamp(12_000)).is_empty());
    end(&mut s, 2, Timestamp(20_000));
    assert_eq!(
        s.take_back(Timestamp(30_000)),
        vec![(JobId(1), gpu.clone())]
    );
    assert_eq!(s.allocation(JobId(1)).unwrap().gpus, gpu);
    // Its start moved on by the 20 s it was suspended: 10 s of GPU time so far.
    assert_eq!(s.allocation(JobId(1)).unwrap().start, Timestamp(20_000));
    assert!(s.suspension(JobId(1)).is_none());
    s.check_invariants().unwrap();
    // A job waiting for GPUs does not get the taken-back one.
    s.enqueue(job(3, "bob", 2, H));
    assert!(ids(&s.schedule(Timestamp(31_000))).is_empty());
}

#[test]
fn only_whole_gpus_on_one_node_are_suspended_and_an_unwanted_job_stays_suspended() {
    let mut s = running(&[(1, 0), (2, 1)], 0);
    assert!(matches!(
        s.suspend(JobId(1), Timestamp(1)),
        Err(SuspendError::Shape { .. })
    ));
    assert_eq!(
        s.suspend(JobId(9), Timestamp(1)),
        Err(SuspendError::NotRunning(JobId(9)))
    );
    s.suspend(JobId(2), Timestamp(5_000)).unwrap();
    assert!(s.take_back(Timestamp(9_000)).is_empty(), "not wanted yet");
    // Ended while suspended: charged for its GPU up to the suspension, then forgotten.
    let spec = s.job(JobId(2)).unwrap().clone();
    let alloc = s.allocation(JobId(2)).unwrap().clone();
    let charge = s.charge_for(&spec, &alloc, Timestamp(3_600_000));
    let five_seconds = s.policy().credits.charge(1, "rtx4090", 5);
    assert!(
        charge > 0.0 && (charge - five_seconds).abs() < 1e-9,
        "{charge} vs {five_seconds}"
    );
    // What finish returns is what the ledger settles: the same 5 s of its GPU.
    let (spec, charged) = s
        .finish(JobId(2), JobState::Cancelled, Timestamp(3_600_000))
        .unwrap();
    assert_eq!(charged.gpus.len(), 1);
    let settled = s.charge_for(&spec, &charged, Timestamp(3_600_000));
    assert!(
        (settled - five_seconds).abs() < 1e-9,
        "{settled} vs {five_seconds}"
    );
    assert!(s.suspension(JobId(2)).is_none());
    s.check_invariants().unwrap();
}

#[test]
fn two_sessions_waiting_for_one_gpu_get_it_in_job_order_and_never_both() {
    let mut s = running(&[(1, 2)], 0);
    // Job 1 lends both GPUs; job 2 takes them and is suspended in turn.
    s.suspend(JobId(1), Timestamp(1_000)).unwrap();
    s.enqueue(job(2, "bob", 2, H));
    assert_eq!(ids(&s.schedule(Timestamp(2_000))), [2]);
    s.suspend(JobId(2), Timestamp(3_000)).unwrap();
    assert!(s.want_back(JobId(2)) && s.want_back(JobId(1)));
    let back = s.take_back(Timestamp(4_000));
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!(back[0].0, JobId(1));
    s.check_invariants().unwrap();
    assert!(s.take_back(Timestamp(5_000)).is_empty());
    assert!(s.suspension(JobId(2)).is_some_and(|p| p.wanted));
}
