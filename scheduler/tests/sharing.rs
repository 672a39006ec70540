//! GPU sharing: `--gpu-share` jobs in share slots, next to whole-GPU jobs, in backfill and in
//! restores.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::admission::AdmissionError;
use labpool_scheduler::node::NodeState;
use labpool_scheduler::{Allocation, Decision, JobId, JobSpec, Scheduler, Timestamp};

/// A `--gpu-share` job as a test builds it.
fn share_job(id: u64, gpus: u32, limit_s: u64) -> JobSpec {
    let mut j = job(id, "u", gpus, limit_s);
    j.resources.gpu_share = true;
    j
}

fn holders(s: &Scheduler, node: &str, gpu: u32) -> Vec<u64> {
    s.node(node)
        .unwrap()
        .gpu_holders(gpu)
        .iter()
        .map(|j| j.0)
        .collect()
}

#[test]
fn two_sharers_hold_one_gpu_with_share_2_and_never_three() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"], 2, 8)).unwrap();
    for id in 1..=3 {
        submit(&mut s, id, share_res(1), None);
    }
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(ids(&d), [1, 2]);
    assert_eq!(st[&1], ("box".to_string(), vec![0]));
    assert_eq!(st[&2], ("box".to_string(), vec![0]));
    assert!(d.iter().all(|d| match d {
        Decision::Start { allocation, .. } => allocation.shared,
        _ => true,
    }));
    assert_eq!(holders(&s, "box", 0), [1, 2]);
    assert_eq!(s.node("box").unwrap().gpu_owner(0), None);
    assert_eq!(
        s.node("box").unwrap().held_gpus().collect::<Vec<_>>(),
        [(0, JobId(1)), (0, JobId(2))]
    );
    assert_eq!(s.node("box").unwrap().state(), NodeState::Allocated);
    assert!(
        reason(&s, 3).starts_with("Resources (0/1 nodes fit: 1 gpus-free; reserved on box)"),
        "{}",
        reason(&s, 3)
    );
    s.check_invariants().unwrap();
    // Never three, however many passes run.
    assert!(ids(&s.schedule(Timestamp(10))).is_empty());
    assert_eq!(holders(&s, "box", 0), [1, 2]);

    // One sharer ends: the third takes its slot, on the same GPU.
    end(&mut s, 1, Timestamp(1000));
    let d = s.schedule(Timestamp(1001));
    assert_eq!(started(&d)[&3], ("box".to_string(), vec![0]));
    assert_eq!(holders(&s, "box", 0), [2, 3]);
    s.check_invariants().unwrap();
}

#[test]
fn a_whole_gpu_job_waits_while_sharers_hold_the_gpu() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"], 2, 8)).unwrap();
    submit(&mut s, 1, share_res(1), None);
    assert_eq!(ids(&s.schedule(Timestamp(0))), [1]);
    // One slot is left, but a whole job needs the GPU wholly free.
    submit(&mut s, 2, res(1, None), None);
    assert!(ids(&s.schedule(Timestamp(1))).is_empty());
    assert!(
        reason(&s, 2).starts_with("Resources (0/1 nodes fit: 1 gpus-free"),
        "{}",
        reason(&s, 2)
    );
    end(&mut s, 1, Timestamp(500));
    let d = s.schedule(Timestamp(501));
    assert_eq!(started(&d)[&2], ("box".to_string(), vec![0]));
    assert_eq!(s.node("box").unwrap().gpu_owner(0), Some(JobId(2)));
    // Held whole: a sharer now waits for it.
    submit(&mut s, 3, share_res(1), None);
    assert!(ids(&s.schedule(Timestamp(502))).is_empty());
    assert!(reason(&s, 3).contains("gpus-free"), "{}", reason(&s, 3));
    s.check_invariants().unwrap();
    end(&mut s, 2, Timestamp(600));
    assert_eq!(ids(&s.schedule(Timestamp(601))), [3]);
    s.check_invariants().unwrap();
}

#[test]
fn sharers_backfill_only_where_they_do_not_delay_a_whole_reservation() {
    // One GPU, share 2. Sharer 1 runs for 2 h. Whole job 2 (1 h) is reserved for t = 2 h.
    // Sharer 3 (3 h) would still hold a slot at 2 h: it waits, though a slot is free.
    // Sharer 4 (1 h) ends before 2 h: it backfills next to sharer 1.
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"], 2, 8)).unwrap();
    s.enqueue(share_job(1, 1, 2 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    s.enqueue(job(2, "u", 1, H));
    s.enqueue(share_job(3, 1, 3 * H));
    s.enqueue(share_job(4, 1, H));
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [4]);
    assert_eq!(started(&d)[&4].1, [0]);
    assert_eq!(code(&s, 2), "Resources");
    assert_eq!(
        s.explain(JobId(2)).unwrap().reservation,
        Some(("box".to_string(), at(2.0)))
    );
    assert_eq!(code(&s, 3), "Priority");
    assert!(
        reason(&s, 3).contains("held for higher-priority jobs: box for job 2"),
        "{}",
        reason(&s, 3)
    );
    s.check_invariants().unwrap();
    end(&mut s, 4, at(1.0));
    assert!(ids(&s.schedule(at(1.0))).is_empty());
    end(&mut s, 1, at(2.0));
    assert_eq!(ids(&s.schedule(at(2.0))), [2]);
    end(&mut s, 2, at(3.0));
    assert_eq!(ids(&s.schedule(at(3.0))), [3]);
    s.check_invariants().unwrap();
}

#[test]
fn a_sharing_job_needs_a_shareable_gpu() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 8)).unwrap();
    let r = share_res(1);
    let e = s.admit(&req("u", &r)).unwrap_err();
    assert!(
        matches!(&e, AdmissionError::NoShareableGpus { requested: 1, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "job asks to share 1 GPUs (--gpu-share) but no node in partition normal has 1 shareable GPUs (share > 1); no GPU here is shared"
    );
    assert!(e.hint().unwrap().contains("leave out --gpu-share"));
    // Queued anyway (say, before an admin made the GPUs whole again): it waits, and says why.
    s.enqueue(share_job(1, 1, H));
    assert!(ids(&s.schedule(Timestamp(0))).is_empty());
    assert_eq!(reason(&s, 1), "BadConstraints (0/1 nodes fit: 1 gpu-share)");
    // Another node shares one GPU: a 1-GPU sharer is admitted, a 2-GPU sharer is not.
    let mut one = shared_node("mix", &["t4"; 2], 1, 8);
    one.gpus[1].share = 2;
    s.upsert_node(one).unwrap();
    assert!(s.admit(&req("u", &r)).is_ok());
    let two = share_res(2);
    assert_eq!(
        s.admit(&req("u", &two)).unwrap_err().to_string(),
        "job asks to share 2 GPUs (--gpu-share) but no node in partition normal has 2 shareable GPUs (share > 1); shareable: 1 on mix"
    );
    let d = s.schedule(Timestamp(1));
    assert_eq!(started(&d)[&1], ("mix".to_string(), vec![1]));
    s.check_invariants().unwrap();
}

#[test]
fn sharers_pack_onto_one_gpu_and_leave_the_other_whole() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"; 2], 2, 8)).unwrap();
    submit(&mut s, 1, share_res(1), None);
    submit(&mut s, 2, share_res(1), None);
    submit(&mut s, 3, res(1, None), None);
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(st[&1].1, [0]);
    assert_eq!(st[&2].1, [0]);
    assert_eq!(st[&3].1, [1]);
    assert_eq!(s.node("box").unwrap().gpu_owner(1), Some(JobId(3)));
    s.check_invariants().unwrap();
    // With GPU 0 held whole, sharers go to GPU 1 and join each other there.
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"; 2], 2, 8)).unwrap();
    submit(&mut s, 1, res(1, None), None);
    s.schedule(Timestamp(0));
    submit(&mut s, 2, share_res(1), None);
    submit(&mut s, 3, share_res(1), None);
    let st = started(&s.schedule(Timestamp(1)));
    assert_eq!((st[&2].1.clone(), st[&3].1.clone()), (vec![1], vec![1]));
    s.check_invariants().unwrap();
}

#[test]
fn a_sharer_joins_a_node_with_sharers_before_breaking_a_whole_gpu() {
    // Node a: three GPUs, one of them shared by a running job. Node b: one wholly free GPU.
    // Bin-packing alone would pick b (fullest afterwards); the sharer joins GPU 0 of a instead.
    let mut s = sched();
    s.upsert_node(shared_node("a", &["t4"; 3], 2, 8)).unwrap();
    s.upsert_node(shared_node("b", &["t4"], 2, 8)).unwrap();
    let alloc = Allocation {
        start: Timestamp(0),
        node: "a".into(),
        gpus: vec![0],
        cpus: 1,
        mem_mib: 0,
        shared: true,
        units: 1,
        others: Vec::new(),
        ports: None,
    };
    s.restore_running(share_job(1, 1, H), alloc).unwrap();
    submit(&mut s, 2, share_res(1), None);
    let st = started(&s.schedule(Timestamp(1)));
    assert_eq!(st[&2], ("a".to_string(), vec![0]));
    // A whole job still takes the fullest node.
    submit(&mut s, 3, res(1, None), None);
    assert_eq!(started(&s.schedule(Timestamp(2)))[&3].0, "b");
    s.check_invariants().unwrap();
}

#[test]
fn restore_respects_share_slots() {
    let mut s = sched();
    s.upsert_node(shared_node("box", &["t4"; 2], 2, 8)).unwrap();
    let shared = |gpu| Allocation {
        start: Timestamp(0),
        node: "box".into(),
        gpus: vec![gpu],
        cpus: 1,
        mem_mib: 0,
        shared: true,
        units: 1,
        others: Vec::new(),
        ports: None,
    };
    s.restore_running(share_job(1, 1, H), shared(0)).unwrap();
    s.restore_running(share_job(2, 1, H), shared(0)).unwrap();
    let e = s
        .restore_running(share_job(3, 1, H), shared(0))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("GPU 0 already has sharing jobs (1, 2) holding 2 of its 2 share units"),
        "{e}"
    );
    let whole = Allocation {
        shared: false,
        units: 1,
        ..shared(0)
    };
    let e = s.restore_running(job(4, "u", 1, H), whole).unwrap_err();
    assert!(
        e.to_string()
            .contains("GPU 0 is already shared by jobs 1, 2"),
        "{e}"
    );
    s.restore_running(
        job(5, "u", 1, H),
        Allocation {
            shared: false,
            units: 1,
            ..shared(1)
        },
    )
    .unwrap();
    let e = s
        .restore_running(share_job(6, 1, H), shared(1))
        .unwrap_err();
    assert!(e.to_string().contains("already held by job 5"), "{e}");
    s.check_invariants().unwrap();
    assert_eq!(s.node("box").unwrap().state(), NodeState::Allocated);
    // Requeue gives a sharer's slot back.
    assert!(s.requeue(JobId(1)));
    assert_eq!(holders(&s, "box", 0), [2]);
    s.check_invariants().unwrap();
}
