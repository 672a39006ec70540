//! QOS and account limits: per-user caps, account caps on GPUs, wall time and job counts, and
//! jobs whose account or partition access went away.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::policy::{Account, Limits};
use labpool_scheduler::{JobId, JobSpec, Scheduler};
use std::collections::BTreeSet;

#[test]
fn a_user_at_the_per_user_cap_waits_and_starts_when_a_job_ends() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    s.set_user_limits(
        "alice",
        Limits {
            max_gpus_per_user: Some(2),
            ..Limits::default()
        },
    );
    s.enqueue(job(1, "alice", 2, H));
    s.enqueue(job(2, "alice", 1, H));
    s.enqueue(job(3, "bob", 1, H));
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [1, 3]);
    assert_eq!(code(&s, 2), "QOSMaxGRESPerUser");
    assert!(
        reason(&s, 2)
            .contains("alice holds 2 GPUs and this job asks for 1; MaxTRESPerUser=gres/gpu=2"),
        "{}",
        reason(&s, 2)
    );
    assert_eq!(s.explain(JobId(2)).unwrap().stage, "limits");
    end(&mut s, 1, at(0.5));
    assert_eq!(ids(&s.schedule(at(0.5))), [2]);
}

#[test]
fn account_caps_wall_time_and_job_counts() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 8], 16)).unwrap();
    let members: BTreeSet<String> = ["alice", "bob"].into_iter().map(String::from).collect();
    let mut limits = Limits::default();
    limits
        .apply(&["GrpTRES=gres/gpu=3", "MaxWall=2:00:00", "MaxJobsPerUser=2"])
        .unwrap();
    s.set_account("vision", Account { members, limits });
    let spec = |id, user: &str, gpus, limit| JobSpec {
        account: Some("vision".into()),
        ..job(id, user, gpus, limit)
    };
    s.enqueue(spec(1, "alice", 2, H));
    s.enqueue(spec(2, "bob", 2, H)); // would make 4 > GrpTRES 3
    s.enqueue(spec(3, "bob", 1, 3 * H)); // over MaxWall
    s.enqueue(spec(4, "alice", 1, H));
    s.enqueue(spec(5, "alice", 0, H)); // alice already runs 2 jobs
    let d = s.schedule(at(0.0));
    assert_eq!(ids(&d), [1, 4]);
    assert_eq!(code(&s, 2), "AssocGrpGRES");
    assert_eq!(code(&s, 3), "QOSMaxWallDurationPerJobLimit");
    assert_eq!(code(&s, 5), "QOSMaxJobsPerUserLimit");
    assert_eq!(s.limits_for(&spec(9, "carol", 1, H)).grp_gpus, Some(3));
}

#[test]
fn account_per_user_limits_count_only_that_accounts_jobs() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 8], 16)).unwrap();
    let members = |u: &[&str]| u.iter().map(|s| s.to_string()).collect();
    s.set_account(
        "nlp",
        Account {
            members: members(&["bob"]),
            limits: Limits::default(),
        },
    );
    let capped = Limits {
        max_gpus_per_user: Some(2),
        ..Limits::default()
    };
    s.set_account(
        "vision",
        Account {
            members: members(&["bob"]),
            limits: capped,
        },
    );
    s.enqueue(JobSpec {
        account: Some("nlp".into()),
        ..job(1, "bob", 4, H)
    });
    s.enqueue(JobSpec {
        account: Some("vision".into()),
        ..job(2, "bob", 2, H)
    });
    s.enqueue(JobSpec {
        account: Some("vision".into()),
        ..job(3, "bob", 1, H)
    });
    assert_eq!(
        ids(&s.schedule(at(0.0))),
        [1, 2],
        "bob's nlp GPUs do not count against vision's cap"
    );
    assert!(
        reason(&s, 3).contains("bob holds 2 GPUs in account vision"),
        "{}",
        reason(&s, 3)
    );
}

#[test]
fn jobs_wait_when_their_account_or_partition_access_goes_away() {
    let mut high = partition("high", false, 10, H);
    high.allow_accounts = Some(vec!["deadline".into()]);
    let mut s = Scheduler::new(vec![partition("normal", true, 0, 86_400), high]).unwrap();
    s.upsert_node(node("box", &["t4"; 1], 16)).unwrap();
    let alice: BTreeSet<String> = ["alice".to_string()].into();
    s.set_account(
        "deadline",
        Account {
            members: alice,
            limits: Limits::default(),
        },
    );
    s.enqueue(JobSpec {
        account: Some("deadline".into()),
        partition: "high".into(),
        ..job(1, "alice", 1, H)
    });
    s.remove_account("deadline");
    s.schedule(at(0.0));
    assert_eq!(code(&s, 1), "InvalidAccount");
    assert!(
        reason(&s, 1).contains("account deadline was removed"),
        "{}",
        reason(&s, 1)
    );
    s.set_account(
        "deadline",
        Account {
            members: BTreeSet::new(),
            limits: Limits::default(),
        },
    );
    s.schedule(at(0.1));
    assert!(
        reason(&s, 1).contains("alice is no longer in account deadline"),
        "{}",
        reason(&s, 1)
    );
}
