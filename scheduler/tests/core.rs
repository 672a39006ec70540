//! The scheduling core driven through its public API: placement, reasons, reservations,
//! admission errors, and a property test that no GPU is ever given twice.

use labpool_scheduler::admission::AdmissionError;
use labpool_scheduler::node::{GpuDevice, NodeSpec, NodeState};
use labpool_scheduler::partition::Partition;
use labpool_scheduler::{Decision, JobId, JobSpec, Resources, Scheduler, TimeLimit, Timestamp};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn partition(name: &str, default: bool, priority: u32, max_s: u64) -> Partition {
    Partition {
        name: name.into(),
        default,
        priority,
        nodes: None,
        default_time: TimeLimit::Seconds(max_s.min(3600)),
        max_time: TimeLimit::Seconds(max_s),
    }
}

fn node(name: &str, gpus: &[&str], cpus: u32) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        gpus: gpus
            .iter()
            .enumerate()
            .map(|(i, t)| GpuDevice {
                index: i as u32,
                gpu_type: t.to_string(),
                product: "virtual".into(),
                memory_mib: 0,
                uuid: None,
            })
            .collect(),
        cpus,
        mem_mib: 64 * 1024,
    }
}

fn sched() -> Scheduler {
    Scheduler::new(vec![
        partition("normal", true, 0, 86_400),
        partition("high", false, 10, 3600),
    ])
    .unwrap()
}

fn res(gpus: u32, ty: Option<&str>) -> Resources {
    Resources {
        gpus,
        gpu_type: ty.map(str::to_string),
        cpus: 1,
        mem_mib: 0,
    }
}

fn submit(s: &mut Scheduler, id: u64, r: Resources, partition: Option<&str>) {
    let a = s.admit(partition, None, &r).expect("admitted");
    s.enqueue(JobSpec {
        id: JobId(id),
        name: format!("j{id}"),
        user: "u".into(),
        partition: a.partition,
        resources: r,
        time_limit: a.time_limit,
        submit_time: Timestamp(id as i64),
    });
}

fn started(d: &[Decision]) -> BTreeMap<u64, (String, Vec<u32>)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Start { job, allocation } => {
                Some((job.0, (allocation.node.clone(), allocation.gpus.clone())))
            }
            _ => None,
        })
        .collect()
}

fn reason(d: &[Decision], id: u64) -> String {
    d.iter()
        .find_map(|d| match d {
            Decision::Wait { job, reason } if job.0 == id => Some(reason.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no wait decision for job {id} in {d:?}"))
}

#[test]
fn gpus_are_handed_out_lowest_first_and_never_twice() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16));
    for id in 1..=5 {
        submit(&mut s, id, res(1, None), None);
    }
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(st.len(), 4);
    assert_eq!(st[&1].1, [0]);
    assert_eq!(st[&4].1, [3]);
    assert_eq!(reason(&d, 5), "Resources (0/1 nodes fit: 1 gpus-free)");
    assert_eq!(s.node("box").unwrap().state(), NodeState::Allocated);
    s.check_invariants().unwrap();

    s.finish(JobId(2)).unwrap();
    let d = s.schedule(Timestamp(1));
    assert_eq!(started(&d)[&5].1, [1]);
    s.check_invariants().unwrap();
}

#[test]
fn blocked_big_job_holds_the_node_against_smaller_ones() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16));
    submit(&mut s, 1, res(3, None), None);
    submit(&mut s, 2, res(4, None), None);
    submit(&mut s, 3, res(1, None), None);
    let d = s.schedule(Timestamp(0));
    assert_eq!(started(&d).keys().copied().collect::<Vec<_>>(), [1]);
    assert!(reason(&d, 2).starts_with("Resources"));
    let r3 = reason(&d, 3);
    assert!(
        r3.starts_with(
            "Priority (0/1 nodes fit: 1 reserved; held for higher-priority jobs: box for job 2"
        ),
        "{r3}"
    );
    // Nothing changes: no repeated wait decisions.
    assert!(s.schedule(Timestamp(1)).is_empty());
    s.finish(JobId(1)).unwrap();
    let d = s.schedule(Timestamp(2));
    assert_eq!(started(&d).keys().copied().collect::<Vec<_>>(), [2]);
    s.finish(JobId(2)).unwrap();
    assert_eq!(
        started(&s.schedule(Timestamp(3)))
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        [3]
    );
}

#[test]
fn partition_priority_goes_first_and_types_are_respected() {
    let mut s = sched();
    s.upsert_node(node("a", &["a100", "a100"], 8));
    s.upsert_node(node("b", &["t4", "t4"], 8));
    submit(&mut s, 1, res(2, Some("a100")), None);
    submit(&mut s, 2, res(2, Some("a100")), Some("high"));
    submit(&mut s, 3, res(1, Some("t4")), None);
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(st[&2], ("a".to_string(), vec![0, 1]));
    assert_eq!(st[&3].0, "b");
    assert!(!st.contains_key(&1));
    assert_eq!(
        reason(&d, 1),
        "Resources (0/2 nodes fit: 1 gpu-type, 1 gpus-free)"
    );
}

#[test]
fn down_nodes_give_reqnodenotavail_and_requeue_keeps_place() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 4));
    submit(&mut s, 1, res(1, None), None);
    assert_eq!(started(&s.schedule(Timestamp(0))).len(), 1);
    s.set_node_down("box", Some("no heartbeat".into()));
    assert_eq!(s.node("box").unwrap().state(), NodeState::Down);
    submit(&mut s, 2, res(1, None), None);
    assert!(s.requeue(JobId(1)));
    let d = s.schedule(Timestamp(1));
    assert!(reason(&d, 1).starts_with("ReqNodeNotAvail"));
    s.set_node_down("box", None);
    let st = started(&s.schedule(Timestamp(2)));
    assert_eq!(st.keys().copied().collect::<Vec<_>>(), [1, 2]);
    s.check_invariants().unwrap();
}

#[test]
fn admission_refuses_what_could_never_run() {
    let mut s = sched();
    s.upsert_node(node("small", &["t4"; 2], 4));
    s.upsert_node(node("big", &["t4"; 4], 8));
    let e = s.admit(None, None, &res(8, None)).unwrap_err();
    assert!(
        matches!(&e, AdmissionError::TooManyGpus { node, most: 4, .. } if node == "big"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "job asks for 8 GPUs but the node with the most, big, has 4"
    );
    assert_eq!(e.hint().unwrap(), "ask for at most 4 (--gpus 4)");
    let e = s.admit(None, None, &res(1, Some("a100"))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no node in partition normal has GPUs of type 'a100'; types here: t4 (4 on big, 2 on small)"
    );
    let e = s.admit(Some("gpu"), None, &res(1, None)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown partition 'gpu'; partitions here: normal (default), high"
    );
    let e = s
        .admit(Some("high"), Some(TimeLimit::Seconds(7200)), &res(1, None))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "time limit 2:00:00 is over partition high's maximum of 1:00:00"
    );
    let e = s
        .admit(
            None,
            None,
            &Resources {
                cpus: 64,
                ..res(0, None)
            },
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "job asks for 64 CPUs but the largest node, big, has 8"
    );
    let ok = s
        .admit(
            Some("high"),
            Some(TimeLimit::Unlimited),
            &res(4, Some("t4")),
        )
        .unwrap();
    assert_eq!(
        (ok.partition.as_str(), ok.time_limit),
        ("high", TimeLimit::Seconds(3600))
    );
}

#[test]
fn gpu_jobs_on_gpu_less_nodes_are_told_so() {
    let mut s = sched();
    s.upsert_node(node("cpu-only", &[], 8));
    let e = s.admit(None, None, &res(1, None)).unwrap_err();
    assert!(
        matches!(e, AdmissionError::NoGpus { requested: 1, .. }),
        "{e}"
    );
    assert!(e.hint().unwrap().contains("virtual_gpus"));
    assert!(s.admit(None, None, &res(0, None)).is_ok());
}

#[test]
fn restore_refuses_conflicts() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 4));
    submit(&mut s, 1, res(1, None), None);
    s.schedule(Timestamp(0));
    let spec = JobSpec {
        id: JobId(9),
        name: "x".into(),
        user: "u".into(),
        partition: "normal".into(),
        resources: res(1, None),
        time_limit: TimeLimit::Seconds(60),
        submit_time: Timestamp(0),
    };
    let alloc = labpool_scheduler::Allocation {
        node: "box".into(),
        gpus: vec![0],
        cpus: 1,
        mem_mib: 0,
    };
    let e = s.restore_running(spec.clone(), alloc.clone()).unwrap_err();
    assert!(
        e.to_string().contains("GPU 0 is already held by job 1"),
        "{e}"
    );
    let moved = labpool_scheduler::Allocation {
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

#[derive(Debug, Clone)]
enum Step {
    Submit {
        gpus: u32,
        ty: usize,
        cpus: u32,
        high: bool,
    },
    Finish(usize),
    NodeDown(usize),
    NodeUp(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u32..=4, 0usize..3, 1u32..=4, any::<bool>()).prop_map(|(gpus, ty, cpus, high)| Step::Submit { gpus, ty, cpus, high }),
        3 => any::<usize>().prop_map(Step::Finish),
        1 => any::<usize>().prop_map(Step::NodeDown),
        1 => any::<usize>().prop_map(Step::NodeUp),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Something bad never happens: whatever arrives, no GPU is held twice and no node is
    /// over-committed, after every step.
    #[test]
    fn invariants_hold_under_random_streams(
        shapes in prop::collection::vec((1usize..=8, 0usize..3, 2u32..=16), 1..5),
        steps in prop::collection::vec(step(), 1..120),
    ) {
        let types = ["a100", "t4", "v100"];
        let mut s = sched();
        for (i, (n, ty, cpus)) in shapes.iter().enumerate() {
            s.upsert_node(node(&format!("n{i}"), &vec![types[*ty]; *n], *cpus));
        }
        let mut next = 1u64;
        for (t, st) in steps.into_iter().enumerate() {
            match st {
                Step::Submit { gpus, ty, cpus, high } => {
                    let r = Resources { gpus, gpu_type: Some(types[ty].to_string()), cpus, mem_mib: 0 };
                    let part = if high { Some("high") } else { None };
                    if s.admit(part, None, &r).is_ok() {
                        submit(&mut s, next, r, part);
                        next += 1;
                    }
                }
                Step::Finish(k) => {
                    let running: Vec<JobId> = s.running().map(|(j, _)| j.id).collect();
                    if !running.is_empty() {
                        s.finish(running[k % running.len()]);
                    }
                }
                Step::NodeDown(k) => { s.set_node_down(&format!("n{}", k % shapes.len()), Some("test".into())); }
                Step::NodeUp(k) => { s.set_node_down(&format!("n{}", k % shapes.len()), None); }
            }
            let decisions = s.schedule(Timestamp(t as i64));
            for d in &decisions {
                if let Decision::Start { allocation, job } = d {
                    let n = s.node(&allocation.node).unwrap();
                    prop_assert!(n.down.is_none(), "job {} started on a down node", job);
                }
            }
            s.check_invariants().map_err(TestCaseError::fail)?;
        }
    }

    /// The same events give the same decisions.
    #[test]
    fn decisions_are_deterministic(jobs in prop::collection::vec((1u32..=4, 0usize..2), 1..40)) {
        let run = || {
            let mut s = sched();
            s.upsert_node(node("a", &["t4"; 4], 8));
            s.upsert_node(node("b", &["a100"; 2], 8));
            let mut out = Vec::new();
            for (i, (g, ty)) in jobs.iter().enumerate() {
                let r = Resources { gpus: *g, gpu_type: Some(["t4", "a100"][*ty].into()), cpus: 1, mem_mib: 0 };
                if s.admit(None, None, &r).is_ok() {
                    submit(&mut s, i as u64 + 1, r, None);
                }
                out.extend(s.schedule(Timestamp(i as i64)));
                if i % 3 == 0 {
                    let first = s.running().map(|(j, _)| j.id).next();
                    if let Some(j) = first { s.finish(j); }
                }
            }
            out
        };
        prop_assert_eq!(run(), run());
    }
}
