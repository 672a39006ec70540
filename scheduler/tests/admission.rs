//! Admission: what could never run is refused at submit, with accounts, partitions, the
//! emergency cap and submit limits checked.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::admission::AdmissionError;
use labpool_scheduler::policy::{Account, Limits};
use labpool_scheduler::{Resources, Scheduler, TimeLimit};

#[test]
fn admission_refuses_what_could_never_run() {
    let mut s = sched();
    s.upsert_node(node("small", &["t4"; 2], 4)).unwrap();
    s.upsert_node(node("big", &["t4"; 4], 8)).unwrap();
    let r8 = res(8, None);
    let e = s.admit(&req("u", &r8)).unwrap_err();
    assert!(
        matches!(&e, AdmissionError::TooManyGpus { node, most: 4, .. } if node == "big"),
        "{e}"
    );
    assert_eq!(e.hint().unwrap(), "ask for at most 4 (--gpus 4)");
    let a100 = res(1, Some("a100"));
    assert_eq!(
        s.admit(&req("u", &a100)).unwrap_err().to_string(),
        "no node in partition normal has GPUs of type 'a100'; types here: t4 (4 on big, 2 on small)"
    );
    let r1 = res(1, None);
    let mut rq = req("u", &r1);
    rq.partition = Some("gpu");
    assert_eq!(
        s.admit(&rq).unwrap_err().to_string(),
        "unknown partition 'gpu'; partitions here: normal (default), high"
    );
    rq.partition = Some("high");
    rq.time_limit = Some(TimeLimit::Seconds(7200));
    assert_eq!(
        s.admit(&rq).unwrap_err().to_string(),
        "time limit 2:00:00 is over partition high's maximum of 1:00:00"
    );
    let cpus = Resources {
        cpus: 64,
        ..res(0, None)
    };
    assert_eq!(
        s.admit(&req("u", &cpus)).unwrap_err().to_string(),
        "job asks for 64 CPUs but the largest node, big, has 8"
    );
    let t4 = res(4, Some("t4"));
    let mut rq = req("u", &t4);
    rq.partition = Some("high");
    rq.time_limit = Some(TimeLimit::Unlimited);
    let ok = s.admit(&rq).unwrap();
    assert_eq!(
        (ok.partition.as_str(), ok.time_limit),
        ("high", TimeLimit::Seconds(3600))
    );
}

#[test]
fn admission_checks_accounts_partitions_the_emergency_cap_and_submit_limits() {
    let mut high = partition("high", false, 10, H);
    high.allow_accounts = Some(vec!["deadline".into()]);
    let mut debug = partition("debug", false, 5, H);
    debug.max_gpus_per_job = Some(1);
    let mut s = Scheduler::new(vec![partition("normal", true, 0, 86_400), high, debug]).unwrap();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    let members = |u: &[&str]| u.iter().map(|s| s.to_string()).collect();
    s.set_account(
        "deadline",
        Account {
            members: members(&["alice"]),
            limits: Limits::default(),
        },
    );
    s.set_account(
        "vision",
        Account {
            members: members(&["alice", "bob"]),
            limits: Limits::default(),
        },
    );
    let r = res(1, None);
    assert_eq!(
        s.admit(&req("alice", &r)).unwrap().account.as_deref(),
        Some("deadline"),
        "first account by name"
    );
    assert_eq!(s.admit(&req("carol", &r)).unwrap().account, None);
    let mut rq = req("bob", &r);
    rq.account = Some("deadline");
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::NotMember { .. })
    ));
    rq.account = Some("nope");
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::UnknownAccount { .. })
    ));
    let mut rq = req("bob", &r);
    rq.partition = Some("high");
    let e = s.admit(&rq).unwrap_err();
    assert_eq!(
        e.to_string(),
        "partition high is only for accounts deadline; this job runs under vision"
    );
    rq.user = "alice";
    assert!(s.admit(&rq).is_ok());
    let r2 = res(2, None);
    let mut rq = req("bob", &r2);
    rq.partition = Some("debug");
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::PartitionGpuCap { max: 1, .. })
    ));
    let r3 = res(3, None);
    let mut rq = req("bob", &r3);
    rq.emergency = true;
    assert!(matches!(
        s.admit(&rq),
        Err(AdmissionError::EmergencyTooBig { max_gpus: 2, .. })
    ));
    s.set_user_limits(
        "bob",
        Limits {
            max_submit_jobs_per_user: Some(2),
            ..Limits::default()
        },
    );
    s.enqueue(job(1, "bob", 1, H));
    let mut rq = req("bob", &r);
    rq.count = 2;
    let e = s.admit(&rq).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bob has 1 jobs queued or running and this adds 2; MaxSubmitJobsPerUser=2"
    );
}

#[test]
fn gpu_jobs_on_gpu_less_nodes_are_told_so() {
    let mut s = sched();
    s.upsert_node(node("cpu-only", &[], 8)).unwrap();
    let e = s.admit(&req("u", &res(1, None))).unwrap_err();
    assert!(
        matches!(e, AdmissionError::NoGpus { requested: 1, .. }),
        "{e}"
    );
    assert!(e.hint().unwrap().contains("virtual_gpus"));
    assert!(s.admit(&req("u", &res(0, None))).is_ok());
}
