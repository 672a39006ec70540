//! Multi-node jobs (gangs): all of their nodes at once or none, backfill that reserves every
//! node they need, refusal of a gang the partition can never hold, and leased ports.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::{Decision, JobId, Resources, Scheduler, Timestamp};

fn gang(nodes: u32, gpus: u32) -> Resources {
    Resources {
        nodes,
        ..res(gpus, None)
    }
}

/// A job on `nodes` nodes with `gpus` GPUs on each, limited to `limit_s`.
fn gang_job(id: u64, nodes: u32, gpus: u32, limit_s: u64) -> labpool_scheduler::JobSpec {
    labpool_scheduler::JobSpec {
        resources: gang(nodes, gpus),
        ..job(id, "u", gpus, limit_s)
    }
}

fn three_nodes() -> Scheduler {
    let mut s = sched();
    for n in ["n1", "n2", "n3"] {
        s.upsert_node(node(n, &["t4"; 4], 8)).unwrap();
    }
    s
}

/// The allocation a start decision gave `id`.
fn allocation(d: &[Decision], id: u64) -> labpool_scheduler::Allocation {
    d.iter()
        .find_map(|d| match d {
            Decision::Start {
                job, allocation, ..
            } if job.0 == id => Some(allocation.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("job {id} did not start: {d:?}"))
}

#[test]
fn a_gang_starts_on_all_its_nodes_at_once_each_with_its_share() {
    let mut s = three_nodes();
    s.enqueue(gang_job(1, 2, 4, H));
    let d = s.schedule(Timestamp(0));
    let a = allocation(&d, 1);
    assert_eq!(a.node_names(), ["n1", "n2"]);
    assert_eq!(a.gpus, [0, 1, 2, 3]);
    assert_eq!(a.others[0].gpus, [0, 1, 2, 3]);
    assert_eq!(a.gpu_count(), 8);
    s.check_invariants().unwrap();
    // Both nodes are full: a 1-GPU job goes to the third.
    s.enqueue(job(2, "u", 1, H));
    let d = s.schedule(Timestamp(1));
    assert_eq!(started(&d)[&2].0, "n3");
    // The end frees both nodes.
    end(&mut s, 1, Timestamp(2));
    s.check_invariants().unwrap();
    s.enqueue(gang_job(3, 2, 4, H));
    let d = s.schedule(Timestamp(3));
    assert_eq!(allocation(&d, 3).node_names(), ["n1", "n2"]);
}

#[test]
fn a_gang_never_starts_partly_and_backfill_holds_all_its_nodes() {
    let mut s = three_nodes();
    // n1 and n2 each get a 3-GPU job for 1 h and 2 h; n3 stays free.
    s.enqueue(job(1, "u", 3, H));
    s.enqueue(job(2, "u", 3, 2 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1, 2]);
    // A 2-node, 4-GPU-per-node gang: only n3 is free now, so nothing of it starts.
    s.enqueue(gang_job(10, 2, 4, H));
    let d = s.schedule(at(0.1));
    assert!(!ids(&d).contains(&10), "{d:?}");
    let why = reason(&s, 10);
    assert!(
        why.contains("1/3 nodes fit (the job needs 2 at once)"),
        "{why}"
    );
    // Reserved from the first time two nodes are free together: when job 1 ends (1 h), on
    // n1 and n3.
    assert!(why.contains("reserved on n[1,3]"), "{why}");
    let note = s.explain(JobId(10)).unwrap();
    assert_eq!(note.reservation.as_ref().unwrap().1, at(1.0));
    // A 1-GPU job that would still hold n3 at 1 h does not backfill there; n2's last GPU
    // is no use to the gang, so it goes to n2.
    s.enqueue(job(11, "u", 1, 3 * H));
    let d = s.schedule(at(0.2));
    assert_eq!(
        started(&d).get(&11).map(|x| x.0.as_str()),
        Some("n2"),
        "{d:?}"
    );
    s.check_invariants().unwrap();
    // Job 1 ends: the gang starts on n1 and n3 together.
    end(&mut s, 1, at(1.0));
    let d = s.schedule(at(1.0));
    assert_eq!(allocation(&d, 10).node_names(), ["n1", "n3"]);
    s.check_invariants().unwrap();
}

#[test]
fn a_gang_larger_than_the_partition_is_refused_at_submit_with_the_count() {
    let s = three_nodes();
    let r = gang(4, 1);
    let e = s.admit(&req("u", &r)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("asks for 4 nodes but only 3 in partition normal"),
        "{text}"
    );
    assert!(text.contains("n[1-3]"), "{text}");
    assert!(e.hint().unwrap().contains("-N 3"), "{:?}", e.hint());
    let r = gang(3, 1);
    assert!(s.admit(&req("u", &r)).is_ok());
}

#[test]
fn every_running_job_is_leased_its_own_ports_and_they_come_back_at_the_end() {
    let mut s = three_nodes();
    for id in 1..=3 {
        s.enqueue(job(id, "u", 1, H));
    }
    s.enqueue(gang_job(4, 2, 1, H));
    let d = s.schedule(Timestamp(0));
    let mut blocks: Vec<(u32, u32)> = (1..=4)
        .map(|id| {
            let p = allocation(&d, id).ports.expect("leased");
            (p.first as u32, p.end())
        })
        .collect();
    blocks.sort();
    assert_eq!(blocks[0].0, 20000, "{blocks:?}");
    for w in blocks.windows(2) {
        assert!(w[0].1 <= w[1].0, "overlap: {blocks:?}");
    }
    // A job of 1 CPU per node: MASTER_PORT, the step launcher, one task.
    assert_eq!(blocks[0].1 - blocks[0].0, 3);
    let first = allocation(&d, 1).ports.unwrap();
    end(&mut s, 1, Timestamp(5));
    s.enqueue(job(5, "u", 1, H));
    let d = s.schedule(Timestamp(6));
    assert_eq!(
        allocation(&d, 5).ports,
        Some(first),
        "the freed block is leased again"
    );
}

#[test]
fn gang_passes_are_deterministic() {
    let run = || {
        let mut s = three_nodes();
        for id in 1..=12u64 {
            if id % 3 == 0 {
                s.enqueue(gang_job(id, 2, 2, H));
            } else {
                s.enqueue(job(id, "u", id as u32 % 4 + 1, H));
            }
        }
        let mut all = Vec::new();
        for t in 0..6 {
            all.push(format!("{:?}", s.schedule(at(t as f64 * 0.5))));
            let running: Vec<u64> = s.running().map(|(j, _)| j.id.0).collect();
            if let Some(id) = running.first() {
                end(&mut s, *id, at(t as f64 * 0.5 + 0.1));
            }
            s.check_invariants().unwrap();
        }
        all
    };
    assert_eq!(run(), run());
}
