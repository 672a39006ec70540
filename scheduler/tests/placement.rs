//! Where jobs go: GPUs handed out lowest first and never twice, down nodes and requeue, the
//! seeded node order, and running jobs restored onto the nodes' books after a restart.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::node::NodeState;
use labpool_scheduler::policy::Policy;
use labpool_scheduler::{Allocation, JobId, Scheduler, Timestamp};
use std::collections::BTreeSet;

#[test]
fn gpus_are_handed_out_lowest_first_and_never_twice() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    for id in 1..=5 {
        submit(&mut s, id, res(1, None), None);
    }
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(st.len(), 4);
    assert_eq!(st[&1].1, [0]);
    assert_eq!(st[&4].1, [3]);
    assert!(
        reason(&s, 5).starts_with("Resources (0/1 nodes fit: 1 gpus-free; reserved on box)"),
        "{}",
        reason(&s, 5)
    );
    assert_eq!(s.node("box").unwrap().state(), NodeState::Allocated);
    s.check_invariants().unwrap();

    end(&mut s, 2, Timestamp(1000));
    let d = s.schedule(Timestamp(1001));
    assert_eq!(started(&d)[&5].1, [1]);
    s.check_invariants().unwrap();
}

#[test]
fn restore_refuses_conflicts() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 4)).unwrap();
    submit(&mut s, 1, res(1, None), None);
    s.schedule(Timestamp(0));
    let spec = job(9, "u", 1, 60);
    let alloc = Allocation {
        start: Timestamp(0),
        node: "box".into(),
        gpus: vec![0],
        cpus: 1,
        mem_mib: 0,
        shared: false,
        units: 1,
        others: Vec::new(),
        ports: None,
    };
    let e = s.restore_running(spec.clone(), alloc.clone()).unwrap_err();
    assert!(
        e.to_string().contains("GPU 0 is already held by job 1"),
        "{e}"
    );
    let moved = Allocation {
        gpus: vec![7],
        ..alloc
    };
    assert!(
        s.restore_running(spec, moved)
            .unwrap_err()
            .to_string()
            .contains("GPU 7 no longer exists")
    );
    s.check_invariants().unwrap();
}

#[test]
fn down_nodes_give_reqnodenotavail_and_requeue_keeps_place() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 4)).unwrap();
    submit(&mut s, 1, res(1, None), None);
    assert_eq!(started(&s.schedule(Timestamp(0))).len(), 1);
    s.set_node_down("box", Some("no heartbeat".into()));
    assert_eq!(s.node("box").unwrap().state(), NodeState::Down);
    submit(&mut s, 2, res(1, None), None);
    assert!(s.requeue(JobId(1)));
    s.schedule(Timestamp(1));
    assert!(reason(&s, 1).starts_with("ReqNodeNotAvail"));
    s.set_node_down("box", None);
    assert_eq!(ids(&s.schedule(Timestamp(2))), [1, 2]);
    s.check_invariants().unwrap();
}

#[test]
fn seeded_node_order_is_reproducible() {
    let build = |seed| {
        let mut policy = Policy::default();
        policy.placement.node_order_seed = Some(seed);
        policy.placement.binpack = false;
        policy.placement.locality = false;
        let mut s =
            Scheduler::with_policy(vec![partition("normal", true, 0, 86_400)], policy).unwrap();
        for n in 0..8 {
            s.upsert_node(node(&format!("n{n}"), &["t4"; 1], 4))
                .unwrap();
        }
        s.enqueue(job(1, "u", 1, H));
        started(&s.schedule(at(0.0)))[&1].0.clone()
    };
    assert_eq!(build(7), build(7));
    let spread: BTreeSet<String> = (0..16).map(build).collect();
    assert!(
        spread.len() > 1,
        "different seeds try nodes in different orders"
    );
}

#[test]
fn foreign_load_takes_gpus_the_pool_never_places_over() {
    let mut s = sched();
    s.upsert_node(node("gn1", &["a100"; 8], 64)).unwrap();
    submit(&mut s, 1, res(2, None), None);
    s.schedule(Timestamp(0));
    // Six GPUs of the eight go to jobs Slurm runs for others: the top free ones.
    let wanted = [(Some("a100".to_string()), 6)].into_iter().collect();
    let foreign = s.set_foreign("gn1", &wanted).unwrap();
    assert_eq!(foreign, [2, 3, 4, 5, 6, 7]);
    assert_eq!(s.node("gn1").unwrap().state(), NodeState::Allocated);
    submit(&mut s, 2, res(1, None), None);
    let d = s.schedule(Timestamp(1));
    assert!(started(&d).is_empty(), "{d:?}");
    assert!(reason(&s, 2).starts_with("Resources"), "{}", reason(&s, 2));
    // The pool's own job ends: its GPUs are free again, the foreign ones stay taken.
    end(&mut s, 1, Timestamp(2));
    let d = s.schedule(Timestamp(3));
    assert_eq!(started(&d)[&2].1, [0]);
    // The foreign load ends.
    s.set_foreign("gn1", &Default::default()).unwrap();
    submit(&mut s, 3, res(7, None), None);
    let d = s.schedule(Timestamp(4));
    assert_eq!(started(&d)[&3].1, [1, 2, 3, 4, 5, 6, 7]);
    s.check_invariants().unwrap();
    assert!(s.set_foreign("gn9", &wanted).is_none());
}

#[test]
fn foreign_load_that_raced_a_pool_job_takes_its_gpus_once_the_pool_job_lets_go() {
    let mut s = sched();
    s.upsert_node(node("gn1", &["a100"; 8], 64)).unwrap();
    submit(&mut s, 1, res(8, None), None);
    assert_eq!(started(&s.schedule(Timestamp(0)))[&1].1.len(), 8);
    // Slurm started a foreign job on all eight GPUs before the pool's job: none is free to
    // count as foreign yet.
    let wanted = [(None, 8)].into_iter().collect();
    assert!(s.set_foreign("gn1", &wanted).unwrap().is_empty());
    // The pool's job never started and is let go: the foreign job holds the node, though
    // Slurm's view did not change, and the job is not placed there again.
    end(&mut s, 1, Timestamp(1));
    assert_eq!(s.node("gn1").unwrap().foreign_gpus().count(), 8);
    submit(&mut s, 2, res(1, None), None);
    let d = s.schedule(Timestamp(2));
    assert!(started(&d).is_empty(), "{d:?}");
    s.check_invariants().unwrap();
}
