//! Where a job may run: `--constraint` over node features, `--nodelist` and `--exclude`, at
//! admission (names and features the pool does not have are refused) and in placement.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::admission::AdmissionError;
use labpool_scheduler::constraint::Constraint;
use labpool_scheduler::hostlist::expand;
use labpool_scheduler::{JobId, JobSpec, NodeRequest, Scheduler, Timestamp};

fn pool() -> Scheduler {
    let mut s = sched();
    for (name, features) in [
        ("gn1", vec!["a100", "ib", "nvlink"]),
        ("gn2", vec!["a100", "ib"]),
        ("gn3", vec!["v100"]),
    ] {
        let mut n = node(name, &["a100"; 2], 8);
        n.features = features.into_iter().map(String::from).collect();
        s.upsert_node(n).unwrap();
    }
    s
}

fn asking(constraint: Option<&str>, nodelist: &str, exclude: &str) -> NodeRequest {
    let list = |t: &str| {
        if t.is_empty() {
            vec![]
        } else {
            expand(t).unwrap()
        }
    };
    NodeRequest {
        constraint: constraint.map(|c| Constraint::parse(c).unwrap()),
        nodelist: list(nodelist),
        exclude: list(exclude),
    }
}

fn queue(s: &mut Scheduler, id: u64, gpus: u32, nodes: NodeRequest) -> Result<(), AdmissionError> {
    let r = res(gpus, None);
    let mut rq = req("u", &r);
    rq.nodes = &nodes;
    let a = s.admit(&rq)?;
    s.enqueue(JobSpec {
        id: JobId(id),
        name: format!("j{id}"),
        user: "u".into(),
        partition: a.partition,
        resources: r.clone(),
        time_limit: a.time_limit,
        submit_time: Timestamp(id as i64),
        nodes: nodes.clone(),
        ..JobSpec::default()
    });
    Ok(())
}

#[test]
fn jobs_land_only_where_their_node_options_allow() {
    let mut s = pool();
    queue(&mut s, 1, 1, asking(Some("nvlink"), "", "")).unwrap();
    queue(&mut s, 2, 1, asking(None, "gn3", "")).unwrap();
    queue(&mut s, 3, 1, asking(Some("a100&ib"), "", "gn[1]")).unwrap();
    queue(&mut s, 4, 1, asking(Some("v100|nvlink"), "", "gn3")).unwrap();
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    assert_eq!(st[&1].0, "gn1");
    assert_eq!(st[&2].0, "gn3");
    assert_eq!(st[&3].0, "gn2");
    assert_eq!(st[&4].0, "gn1");
    s.check_invariants().unwrap();

    // gn1 is full now: a job that only gn1 can take waits, and says which stages turned the
    // other nodes away.
    queue(&mut s, 5, 1, asking(Some("nvlink"), "", "")).unwrap();
    s.schedule(Timestamp(1));
    let why = reason(&s, 5);
    assert!(
        why.contains("2 features") && why.contains("1 gpus-free"),
        "{why}"
    );
}

#[test]
fn names_and_features_the_pool_lacks_are_refused_with_what_it_has() {
    let mut s = pool();
    let e = queue(&mut s, 1, 1, asking(None, "gn[4-5]", "")).unwrap_err();
    assert!(
        matches!(&e, AdmissionError::UnknownNodes { flag: "--nodelist", names, known } if names == &["gn4", "gn5"] && known == "gn[1-3]"),
        "{e}"
    );
    let e = queue(&mut s, 1, 1, asking(None, "", "node9")).unwrap_err();
    assert!(
        e.to_string()
            .contains("--exclude names a node that is not in the pool: node9"),
        "{e}"
    );
    let e = queue(&mut s, 1, 1, asking(Some("a100&h100"), "", "")).unwrap_err();
    assert!(
        e.to_string().contains("features no node has")
            || e.to_string().contains("a feature no node has: h100"),
        "{e}"
    );
    assert!(e.to_string().contains("ib (gn[1-2])"), "{e}");
    let e = queue(&mut s, 1, 1, asking(Some("v100"), "gn1", "")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no node in partition normal matches --constraint v100 with --nodelist gn1"
    );
    assert!(e.hint().is_some());
    assert_eq!(s.pending().count(), 0);
}
