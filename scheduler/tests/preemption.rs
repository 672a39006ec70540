//! Preemption in the core: who may be stopped (overdrawn, borrowing, `--preemptible`), who
//! may stop them (emergency, in-credit within share), the minimum runtime, the cheapest
//! victims, and borrowing beyond `GrpTRES` with lending limits.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::policy::{Account, Limits};
use labpool_scheduler::{Decision, JobId, JobSpec, Scheduler, Timestamp};

/// The (victim, by) pairs of the preempt decisions.
fn preempts(d: &[Decision]) -> Vec<(u64, u64)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Preempt { job, by, .. } => Some((job.0, by.0)),
            _ => None,
        })
        .collect()
}

fn one_node(gpus: usize) -> Scheduler {
    let mut s = sched();
    s.upsert_node(node("n1", &vec!["t4"; gpus], 16)).unwrap();
    s
}

fn min(m: f64) -> Timestamp {
    Timestamp((m * 60_000.0) as i64)
}

/// A job submitted at `t`.
fn job_at(id: u64, user: &str, gpus: u32, t: Timestamp) -> JobSpec {
    JobSpec {
        submit_time: t,
        ..job(id, user, gpus, 10 * H)
    }
}

#[test]
fn an_overdrawn_job_is_preempted_for_an_in_credit_one_after_its_minimum_runtime() {
    let mut s = one_node(2);
    s.set_balance("poor", -10.0);
    s.enqueue(job_at(1, "poor", 2, min(0.0)));
    assert_eq!(ids(&s.schedule(min(0.0))), [1], "idle GPUs are lent");
    s.enqueue(job_at(2, "rich", 2, min(1.0)));
    let d = s.schedule(min(1.0));
    assert!(
        preempts(&d).is_empty(),
        "within its first 10 minutes: {d:?}"
    );
    assert!(!reason(&s, 2).contains("preempting"));
    let d = s.schedule(min(10.0));
    assert_eq!(preempts(&d), [(1, 2)]);
    let r = reason(&s, 2);
    assert!(
        r.contains("preempting job 1 (poor is overdrawn) (grace 120s)"),
        "{r}"
    );
    let why = s.explain(JobId(2)).unwrap();
    assert_eq!(
        why.reservation.as_ref().map(|(n, t)| (n.as_str(), *t)),
        Some(("n1", min(12.0)))
    );
    assert_eq!(s.notice(JobId(1)).unwrap().by, JobId(2));
    // Later passes within the grace neither preempt again nor change the reason.
    let d = s.schedule(min(11.0));
    assert!(preempts(&d).is_empty(), "{d:?}");
    assert_eq!(reason(&s, 2), r);
    // A small job arriving now cannot take what the notice frees for job 2.
    s.enqueue(job_at(3, "rich", 1, min(11.5)));
    assert!(!ids(&s.schedule(min(11.5))).contains(&3));
    // The victim stops and is requeued; job 2 starts, job 1 waits behind it.
    assert!(s.requeue(JobId(1)));
    assert!(s.notice(JobId(1)).is_none());
    let d = s.schedule(min(12.0));
    assert_eq!(ids(&d), [2]);
    s.check_invariants().unwrap();
}

#[test]
fn in_credit_jobs_within_their_share_and_sessions_are_never_preempted() {
    let mut s = one_node(2);
    s.enqueue(job_at(1, "a", 1, min(0.0)));
    s.set_balance("poor", -1.0);
    s.enqueue(JobSpec {
        interactive: true,
        ..job_at(2, "poor", 1, min(0.0))
    });
    assert_eq!(ids(&s.schedule(min(0.0))), [1, 2]);
    s.enqueue(JobSpec {
        emergency: true,
        ..job_at(3, "b", 1, min(1.0))
    });
    let d = s.schedule(min(60.0));
    assert!(preempts(&d).is_empty(), "{d:?}");
    let r = reason(&s, 3);
    assert!(
        r.contains("nothing is preemptible, expected to start within 9:00:00"),
        "{r}"
    );
}

#[test]
fn the_emergency_lane_takes_the_cheapest_preemptible_jobs() {
    let mut s = one_node(4);
    // Job 1: 2 GPUs for 2 h; job 2: 1 GPU since 30 min; job 3: 1 GPU since 20 min.
    let pre = |id, gpus, t| JobSpec {
        preemptible: true,
        ..job_at(id, "u", gpus, t)
    };
    s.enqueue(pre(1, 2, min(0.0)));
    s.schedule(min(0.0));
    s.enqueue(pre(2, 1, min(90.0)));
    s.schedule(min(90.0));
    s.enqueue(pre(3, 1, min(100.0)));
    s.schedule(min(100.0));
    s.enqueue(JobSpec {
        emergency: true,
        ..job_at(4, "e", 2, min(120.0))
    });
    let d = s.schedule(min(120.0));
    // Jobs 2 and 3 lose 0.5 + 0.33 GPU-hours; job 1 would lose 4.
    let mut p = preempts(&d);
    p.sort();
    assert_eq!(p, [(2, 4), (3, 4)]);
    // One GPU is enough: the most recent start goes.
    let mut s = one_node(4);
    s.enqueue(pre(1, 2, min(0.0)));
    s.enqueue(pre(2, 1, min(0.0)));
    s.enqueue(pre(3, 1, min(0.0)));
    s.schedule(min(0.0));
    s.enqueue(JobSpec {
        emergency: true,
        ..job_at(4, "e", 1, min(30.0))
    });
    assert_eq!(preempts(&s.schedule(min(30.0))), [(3, 4)]);
}

fn with_accounts(a: Limits) -> Scheduler {
    let mut s = one_node(4);
    let members = |u: &str| [u.to_string()].into_iter().collect();
    s.set_account(
        "a",
        Account {
            members: members("alice"),
            limits: a,
        },
    );
    s.set_account(
        "b",
        Account {
            members: members("bob"),
            limits: Limits {
                grp_gpus: Some(2),
                ..Limits::default()
            },
        },
    );
    s
}

fn in_account(id: u64, user: &str, account: &str, t: Timestamp) -> JobSpec {
    JobSpec {
        account: Some(account.into()),
        ..job_at(id, user, 1, t)
    }
}

#[test]
fn an_account_borrows_idle_gpus_beyond_its_share_and_gives_them_back() {
    let mut limits = Limits::default();
    limits.apply(&["GrpTRES=gres/gpu=2"]).unwrap();
    // A hard cap: the third job waits.
    let mut s = with_accounts(limits.clone());
    for id in 1..=3 {
        s.enqueue(in_account(id, "alice", "a", min(0.0)));
    }
    assert_eq!(ids(&s.schedule(min(0.0))), [1, 2]);
    assert_eq!(code(&s, 3), "AssocGrpGRES");
    // With a borrow limit of 2, four run, and the two latest are borrowing.
    limits.apply(&["BorrowLimit=gres/gpu=2"]).unwrap();
    let mut s = with_accounts(limits);
    for id in 1..=4 {
        s.enqueue(in_account(id, "alice", "a", min(id as f64)));
        s.schedule(min(id as f64));
    }
    assert_eq!(s.running().count(), 4);
    let borrowing: Vec<u64> = s.borrowing().iter().map(|j| j.0).collect();
    assert_eq!(borrowing, [3, 4]);
    // Bob's group returns within its share: the borrowers give their GPUs back.
    s.enqueue(in_account(5, "bob", "b", min(30.0)));
    s.enqueue(in_account(6, "bob", "b", min(30.0)));
    let mut p = preempts(&s.schedule(min(30.0)));
    p.sort();
    assert_eq!(p, [(3, 6), (4, 5)]);
    assert!(
        reason(&s, 5).contains("borrowing beyond account a's GrpTRES share"),
        "{}",
        reason(&s, 5)
    );
}

#[test]
fn a_lend_limit_keeps_part_of_an_unused_share_free() {
    let mut limits = Limits::default();
    limits
        .apply(&["GrpTRES=gres/gpu=1", "BorrowLimit=gres/gpu=3"])
        .unwrap();
    let mut s = with_accounts(limits);
    let mut b = s.accounts()["b"].clone();
    b.limits.apply(&["LendLimit=gres/gpu=1"]).unwrap();
    s.set_account("b", b);
    for id in 1..=4 {
        s.enqueue(in_account(id, "alice", "a", min(0.0)));
    }
    // Share 1, and of b's share of 2 one GPU is kept: 3 run.
    assert_eq!(ids(&s.schedule(min(0.0))), [1, 2, 3]);
    let r = reason(&s, 4);
    assert!(r.contains("b keeps 1"), "{r}");
}

#[test]
fn with_preemption_off_nothing_is_preempted_and_nothing_borrows() {
    let mut policy = labpool_scheduler::policy::Policy::default();
    policy.preemption.enabled = false;
    let mut s = Scheduler::with_policy(vec![partition("normal", true, 0, 86_400)], policy).unwrap();
    s.upsert_node(node("n1", &["t4"; 2], 16)).unwrap();
    s.enqueue(JobSpec {
        preemptible: true,
        ..job_at(1, "u", 2, min(0.0))
    });
    s.schedule(min(0.0));
    s.enqueue(JobSpec {
        emergency: true,
        ..job_at(2, "e", 2, min(1.0))
    });
    assert!(preempts(&s.schedule(min(60.0))).is_empty());
}
