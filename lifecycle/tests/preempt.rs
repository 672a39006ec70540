//! Preemption in the lifecycle: a notice on every node of the attempt, a requeue (charged for
//! the time it ran) that says who preempted it, whether the job exits on the notice or is
//! stopped after the grace; a cancel meanwhile wins, and a second notice is refused.

use labpool_lifecycle::{
    Effect, Event, JobLife, Lifecycle, Outcome, Placement, Readiness, Transition,
};
use labpool_scheduler::JobState;

fn running(life: &mut Lifecycle, job: u64) {
    life.admit(job, JobLife::pending(true));
    place(life, job);
}

fn place(life: &mut Lifecycle, job: u64) {
    let placement = Placement {
        node: "a".into(),
        gpus: vec![0],
        stdout: "/out".into(),
        stderr: "/out".into(),
        others: vec![],
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

fn ended(life: &mut Lifecycle, job: u64, state: JobState) -> Vec<Effect> {
    let outcome = Outcome {
        state,
        exit_code: None,
        signal: Some(15),
        end_time_ms: 50,
        reason: None,
    };
    life.handle(
        Event::Ended {
            node: "a".into(),
            job,
            attempt: 1,
            outcome,
        },
        50,
    )
}

fn preempt(job: u64) -> Event {
    Event::Preempt {
        job,
        by: 7,
        cause: "alice is overdrawn".into(),
    }
}

#[test]
fn a_preempted_job_gets_its_notice_then_waits_again_charged_for_its_run() {
    let mut life = Lifecycle::new();
    running(&mut life, 1);
    let out = life.handle(preempt(1), 10);
    assert!(out.contains(&Effect::Notice {
        job: 1,
        attempt: 1,
        node: "a".into(),
        by: 7
    }));
    let p = life.job(1).unwrap().preemption.clone().unwrap();
    assert_eq!((p.by, p.at), (7, 10));
    assert!(life.handle(preempt(1), 11).is_empty(), "one notice only");
    // Stopped after the grace (reported CANCELLED by its shim): requeued, charged.
    let out = ended(&mut life, 1, JobState::Cancelled);
    assert!(out.contains(&Effect::Requeue {
        job: 1,
        charged: true
    }));
    let l = life.job(1).unwrap();
    assert_eq!(l.state, JobState::Pending);
    assert_eq!(l.reason.as_deref(), Some("Preempted"));
    assert_eq!(
        l.reason_detail.as_deref(),
        Some("preempted for job 7 (alice is overdrawn)")
    );
    assert!(l.preemption.is_some(), "kept until it is placed again");
    let history: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            Effect::Persist { transition, .. } => transition.event(),
            _ => None,
        })
        .collect();
    assert_eq!(history[0].0, "requeue");
    // Placed again: a new attempt, the notice forgotten.
    place(&mut life, 1);
    let l = life.job(1).unwrap();
    assert_eq!((l.attempt, l.preemption.clone()), (2, None));
}

#[test]
fn a_cancel_during_the_grace_wins_and_a_job_already_stopping_gets_no_notice() {
    let mut life = Lifecycle::new();
    running(&mut life, 1);
    life.handle(preempt(1), 10);
    life.handle(
        Event::Cancel {
            job: 1,
            by: "bob".into(),
        },
        20,
    );
    let out = ended(&mut life, 1, JobState::Cancelled);
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Persist {
            transition: Transition::Ended {
                state: JobState::Cancelled,
                ..
            },
            ..
        }
    )));
    running(&mut life, 2);
    life.handle(
        Event::Cancel {
            job: 2,
            by: "bob".into(),
        },
        5,
    );
    assert!(life.handle(preempt(2), 10).is_empty());
}
