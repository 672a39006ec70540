//! A gang (a job on several nodes) in the lifecycle: it stops on all of its nodes together,
//! whether its batch script ends, it is cancelled, one of its nodes is lost, or one of its
//! parts ends on its own; and a rejoining node is fenced for the gang's attempt too.

use labpool_lifecycle::{Effect, Event, JobLife, Lifecycle, Outcome, Placement, Readiness};
use labpool_scheduler::{JobState, NodeShare};

fn placed(life: &mut Lifecycle, job: u64) {
    life.admit(job, JobLife::pending(true));
    let placement = Placement {
        node: "a".into(),
        gpus: vec![0],
        stdout: "/out".into(),
        stderr: "/out".into(),
        others: vec![NodeShare {
            node: "b".into(),
            gpus: vec![1],
            cpus: 1,
            mem_mib: 0,
        }],
        ports: None,
    };
    let ready = Readiness::Ready {
        isolation: "none".into(),
    };
    life.handle(
        Event::Placed {
            job,
            placement,
            ready,
        },
        1,
    );
}

fn kills(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Kill { node, attempt, .. } => Some(format!("{node}:{attempt}")),
            _ => None,
        })
        .collect()
}

fn outcome(state: JobState) -> Outcome {
    Outcome {
        state,
        exit_code: Some(0),
        signal: None,
        end_time_ms: 5,
        reason: None,
    }
}

#[test]
fn a_gang_is_fenced_on_every_node_and_its_end_stops_the_other_parts() {
    let mut life = Lifecycle::new();
    placed(&mut life, 1);
    assert_eq!(life.expected_on("a"), [(1, 1)]);
    assert_eq!(life.expected_on("b"), [(1, 1)]);
    let e = life.handle(
        Event::Ended {
            node: "a".into(),
            job: 1,
            attempt: 1,
            outcome: outcome(JobState::Completed),
        },
        5,
    );
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Release { job: 1, .. })),
        "{e:?}"
    );
    assert_eq!(kills(&e), ["b:1"]);
}

#[test]
fn cancel_and_requeue_stop_every_part() {
    let mut life = Lifecycle::new();
    placed(&mut life, 1);
    let e = life.handle(
        Event::Cancel {
            job: 1,
            by: "u".into(),
        },
        2,
    );
    assert_eq!(kills(&e), ["a:1", "b:1"]);
    placed(&mut life, 2);
    let e = life.handle(
        Event::Requeue {
            job: 2,
            by: "u".into(),
        },
        2,
    );
    assert_eq!(kills(&e), ["a:1", "b:1"]);
}

#[test]
fn losing_any_node_requeues_the_whole_gang_and_stops_it_on_the_others() {
    let mut life = Lifecycle::new();
    placed(&mut life, 1);
    let e = life.handle(
        Event::NodeDown {
            node: "b".into(),
            reason: "no heartbeat".into(),
        },
        3,
    );
    assert!(
        e.iter().any(|e| matches!(
            e,
            Effect::Requeue {
                job: 1,
                charged: false
            }
        )),
        "{e:?}"
    );
    // The batch node, still up, is told to stop; the lost one is fenced when it rejoins.
    assert_eq!(kills(&e), ["a:1"]);
    let j = life.job(1).unwrap();
    assert_eq!(j.state, JobState::Pending);
    assert!(j.others.is_empty() && j.node.is_none());
    assert!(
        j.reason_detail
            .as_deref()
            .unwrap()
            .contains("one of the job's 2 nodes"),
        "{:?}",
        j.reason_detail
    );
    let e = life.handle(Event::NodeUp { node: "b".into() }, 4);
    assert!(
        e.contains(&Effect::Adopt {
            node: "b".into(),
            expected: vec![]
        }),
        "{e:?}"
    );
}

#[test]
fn a_part_that_ends_on_its_own_stops_the_job() {
    let mut life = Lifecycle::new();
    placed(&mut life, 1);
    let e = life.handle(
        Event::Ended {
            node: "b".into(),
            job: 1,
            attempt: 1,
            outcome: outcome(JobState::Failed),
        },
        4,
    );
    assert_eq!(kills(&e), ["a:1"]);
    assert_eq!(life.job(1).unwrap().state, JobState::Running);
    // The batch node's report then ends it, and no part is left to stop but b's (already
    // gone: a kill of an ended attempt is a no-op on the node).
    let e = life.handle(
        Event::Ended {
            node: "a".into(),
            job: 1,
            attempt: 1,
            outcome: outcome(JobState::Failed),
        },
        6,
    );
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Release { job: 1, .. })),
        "{e:?}"
    );
}

/// A part killed for memory on its node stops the job, which then ends as that part did:
/// OUT_OF_MEMORY, naming the node, not the CANCELLED its batch node reports for being stopped.
#[test]
fn the_job_ends_as_the_part_that_ended_first_did() {
    let mut life = Lifecycle::new();
    placed(&mut life, 1);
    let mut oom = outcome(JobState::OutOfMemory);
    oom.reason = Some("the job used more memory than its limit".into());
    life.handle(
        Event::Ended {
            node: "b".into(),
            job: 1,
            attempt: 1,
            outcome: oom,
        },
        4,
    );
    let mut stopped = outcome(JobState::Cancelled);
    stopped.reason = Some("cancelled".into());
    life.handle(
        Event::Ended {
            node: "a".into(),
            job: 1,
            attempt: 1,
            outcome: stopped,
        },
        6,
    );
    let j = life.job(1).unwrap();
    assert_eq!(j.state, JobState::OutOfMemory);
    let why = j.reason_detail.as_deref().unwrap();
    assert!(
        why.contains("its part on node b ended first (OUT_OF_MEMORY: the job used more memory"),
        "{why}"
    );
}
