//! Jobs held back by what they asked for themselves: dependencies, singleton and array
//! throttles.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::dependency::parse_dependencies;
use labpool_scheduler::job::ArrayTask;
use labpool_scheduler::{Decision, JobId, JobSpec, JobState, Timestamp};

#[test]
fn dependencies_hold_jobs_until_met() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    s.enqueue(job(1, "u", 1, H));
    s.enqueue(JobSpec {
        dependencies: parse_dependencies("afterok:1").unwrap(),
        ..job(2, "u", 1, H)
    });
    s.enqueue(JobSpec {
        dependencies: parse_dependencies("afterany:1").unwrap(),
        ..job(3, "u", 1, H)
    });
    s.enqueue(JobSpec {
        dependencies: parse_dependencies("afterok:99").unwrap(),
        ..job(4, "u", 1, H)
    });
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    assert_eq!(reason(&s, 2), "Dependency (waits for afterok:1)");
    assert_eq!(code(&s, 4), "DependencyNeverSatisfied");
    s.finish(JobId(1), JobState::Failed, at(0.5)).unwrap();
    assert_eq!(ids(&s.schedule(at(0.5))), [3]);
    assert!(
        reason(&s, 2).starts_with("DependencyNeverSatisfied (afterok:1 can no longer be met"),
        "{}",
        reason(&s, 2)
    );
}

#[test]
fn array_throttle_limits_running_tasks() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    for t in 0..4 {
        let array = Some(ArrayTask {
            array_id: JobId(10),
            task: t,
            throttle: Some(2),
        });
        s.enqueue(JobSpec {
            array,
            ..job(10 + t as u64, "u", 1, H)
        });
    }
    assert_eq!(ids(&s.schedule(at(0.0))), [10, 11]);
    assert_eq!(code(&s, 12), "JobArrayTaskLimit");
    end(&mut s, 10, at(0.1));
    assert_eq!(ids(&s.schedule(at(0.1))), [12]);
}

#[test]
fn singleton_runs_one_job_of_a_name_at_a_time_in_submit_order() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    let single = |id, user: &str, name: &str| JobSpec {
        singleton: true,
        name: name.into(),
        ..job(id, user, 1, H)
    };
    s.enqueue(single(1, "u", "train"));
    s.enqueue(single(2, "u", "train"));
    s.enqueue(single(3, "u", "eval")); // another name
    s.enqueue(single(4, "v", "train")); // another user
    s.enqueue(single(5, "u", "train"));
    assert_eq!(ids(&s.schedule(at(0.0))), [1, 3, 4]);
    assert_eq!(
        reason(&s, 2),
        "Dependency (waits for singleton (job 1 has its name))"
    );
    // Job 5 waits for the earliest one not ended.
    assert!(
        reason(&s, 5).contains("job 1 has its name"),
        "{}",
        reason(&s, 5)
    );
    s.finish(JobId(1), JobState::Failed, at(0.5)).unwrap();
    assert_eq!(ids(&s.schedule(at(0.5))), [2]);
    assert!(
        reason(&s, 5).contains("job 2 has its name"),
        "{}",
        reason(&s, 5)
    );
    s.check_invariants().unwrap();
}

#[test]
fn a_job_leaves_the_queue_once_its_limit_no_longer_fits_before_its_deadline() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 1], 16)).unwrap();
    s.enqueue(job(1, "u", 1, 2 * H));
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);
    // One hour of work, due by 1.5 h: it must start by 0.5 h, but the GPU is busy until 2 h.
    s.enqueue(JobSpec {
        deadline: Some(at(1.5)),
        ..job(2, "u", 1, H)
    });
    assert!(
        s.schedule(at(0.25))
            .iter()
            .all(|d| !matches!(d, Decision::Expire { .. }))
    );
    assert_eq!(code(&s, 2), "Resources");
    // A pass is due the moment it can no longer fit.
    assert_eq!(s.next_due(at(0.25)), Some(Timestamp(at(0.5).0 + 1)));
    let d = s.schedule(Timestamp(at(0.5).0 + 1));
    assert_eq!(d, [Decision::Expire { job: JobId(2) }]);
    assert!(s.job(JobId(2)).is_none());
    s.check_invariants().unwrap();
}
