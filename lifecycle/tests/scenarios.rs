//! Lifecycle scenarios through the harness: no processes, no database, no clock.

#[allow(dead_code)] // each test binary uses part of the harness
mod harness;

use harness::Harness;
use labpool_lifecycle::{Effect, Event, Lifecycle, Outcome, Stale, Transition};
use labpool_scheduler::JobState;

#[test]
fn a_job_runs_and_completes_once() {
    let mut h = Harness::new(1, 2);
    let j = h.submit(true);
    assert!(h.place(j, "n0", 2, Harness::ready()));
    assert!(h.nodes["n0"].running.contains(&(j, 1)));
    h.now += 60_000;
    h.finish("n0", j, 1, JobState::Completed);
    h.check().unwrap();
    h.all_ended_once().unwrap();
    assert_eq!(h.store[&j].state, JobState::Completed);
    assert_eq!(h.ledger[&j], vec![2 * 60_000]);
    assert!(h.held.is_empty());
    assert!(h.life.is_empty());
}

#[test]
fn node_down_requeues_a_running_job_and_fences_its_first_attempt() {
    let mut h = Harness::new(2, 1);
    let j = h.submit(true);
    assert!(h.place(j, "n0", 1, Harness::ready()));
    h.cut("n0");
    let l = &h.store[&j];
    assert_eq!(l.state, JobState::Pending);
    assert_eq!(l.reason.as_deref(), Some("NodeFail"));
    assert!(
        l.reason_detail
            .as_deref()
            .unwrap()
            .contains("attempt 1 ran")
    );
    assert!(h.held.is_empty(), "its GPU is free again");
    assert!(h.place(j, "n1", 1, Harness::ready()));
    assert_eq!(h.attempt_of(j), (2, Some("n1".into())));
    // n0 comes back still running attempt 1: the fence kills it, and its late end is ignored.
    h.heal("n0");
    assert!(h.nodes["n0"].running.is_empty());
    h.check().unwrap();
    h.finish("n1", j, 2, JobState::Completed);
    h.check().unwrap();
    h.all_ended_once().unwrap();
}

#[test]
fn a_no_requeue_job_ends_node_fail_with_its_node() {
    let mut h = Harness::new(1, 1);
    let j = h.submit(false);
    assert!(h.place(j, "n0", 1, Harness::ready()));
    h.now += 5_000;
    h.cut("n0");
    let l = &h.store[&j];
    assert_eq!(l.state, JobState::NodeFail);
    assert!(l.reason_detail.as_deref().unwrap().contains("--no-requeue"));
    assert_eq!(h.ledger[&j], vec![5_000], "the time it held is charged");
    h.check().unwrap();
}

#[test]
fn cancel_while_staging_ends_it_uncharged_and_a_late_stage_end_is_ignored() {
    let mut h = Harness::new(1, 1);
    let j = h.submit(true);
    assert!(h.place(j, "n0", 1, Harness::data_stage()));
    assert_eq!(h.store[&j].state, JobState::Staging);
    assert_eq!(h.store[&j].reason.as_deref(), Some("Staging"));
    let out = h.event(Event::Cancel {
        job: j,
        by: "alice".into(),
    });
    assert!(out.contains(&Effect::Release {
        job: j,
        was_staging: true
    }));
    let l = &h.store[&j];
    assert_eq!(l.state, JobState::Cancelled);
    assert_eq!(
        l.reason_detail.as_deref(),
        Some("cancelled by alice while staging")
    );
    let late = h.event(Event::Staged {
        job: j,
        attempt: 1,
        notes: vec!["copied 3 files".into()],
        next: Harness::ready(),
    });
    assert!(
        late.is_empty(),
        "a stage for a cancelled job changes nothing"
    );
    assert!(!h.ledger.contains_key(&j));
    h.check().unwrap();
    h.all_ended_once().unwrap();
}

#[test]
fn data_then_environment_then_start() {
    let mut h = Harness::new(1, 1);
    let j = h.submit(true);
    assert!(h.place(j, "n0", 1, Harness::data_stage()));
    let out = h.event(Event::Staged {
        job: j,
        attempt: 1,
        notes: vec!["imagenet copied".into()],
        next: Harness::env_stage(),
    });
    assert!(
        matches!(&out[0], Effect::Persist { transition: Transition::Noted { event, .. }, .. } if event == "staged")
    );
    assert_eq!(h.store[&j].reason.as_deref(), Some("EnvStaging"));
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Stage {
            kind: labpool_lifecycle::StageKind::Env,
            ..
        }
    )));
    let out = h.event(Event::Staged {
        job: j,
        attempt: 1,
        notes: vec![],
        next: Harness::ready(),
    });
    assert!(out.contains(&Effect::Launch {
        job: j,
        attempt: 1,
        node: "n0".into(),
        staged: true
    }));
    assert_eq!(h.store[&j].state, JobState::Running);
    assert_eq!(h.store[&j].isolation.as_deref(), Some("cgroup v2"));
    h.check().unwrap();
}

#[test]
fn a_full_cache_requeues_and_a_failed_stage_fails_uncharged() {
    let mut h = Harness::new(1, 2);
    let a = h.submit(true);
    let b = h.submit(true);
    assert!(h.place(a, "n0", 1, Harness::data_stage()));
    assert!(h.place(b, "n0", 1, Harness::data_stage()));
    h.event(Event::StageFailed {
        job: a,
        attempt: 1,
        why: "no room".into(),
        retry: Some("CacheFull".into()),
    });
    assert_eq!(h.store[&a].state, JobState::Pending);
    assert_eq!(h.store[&a].reason.as_deref(), Some("CacheFull"));
    h.event(Event::StageFailed {
        job: b,
        attempt: 1,
        why: "source unreadable".into(),
        retry: None,
    });
    assert_eq!(h.store[&b].state, JobState::Failed);
    assert!(h.ledger.is_empty());
    assert!(h.held.is_empty());
    h.check().unwrap();
}

#[test]
fn restart_recovery_adopts_running_attempts_and_resends_cancels() {
    let mut h = Harness::new(2, 1);
    let a = h.submit(true);
    let b = h.submit(true);
    let c = h.submit(true);
    assert!(h.place(a, "n0", 1, Harness::ready()));
    assert!(h.place(b, "n1", 1, Harness::ready()));
    // The cancel of b is recorded, but its kill is lost with the controller.
    let out = h.life.handle(
        Event::Cancel {
            job: b,
            by: "bob".into(),
        },
        h.now,
    );
    let persisted: Vec<Effect> = out
        .into_iter()
        .filter(|e| matches!(e, Effect::Persist { .. }))
        .collect();
    h.carry_out(&persisted);
    h.restart();
    let adopts: Vec<&Effect> = h.effects.iter().collect();
    assert!(adopts.contains(&&Effect::Adopt {
        node: "n0".into(),
        expected: vec![(a, 1)]
    }));
    assert!(adopts.contains(&&Effect::Kill {
        job: b,
        attempt: 1,
        node: "n1".into()
    }));
    // b's kill is carried out after the restart, and its end names who cancelled it.
    assert_eq!(h.store[&b].state, JobState::Cancelled);
    assert_eq!(
        h.store[&b].reason_detail.as_deref(),
        Some("cancelled by bob")
    );
    assert_eq!(h.store[&c].state, JobState::Pending);
    h.check().unwrap();
}

#[test]
fn a_fenced_attempt_reporting_late_is_ignored() {
    let mut h = Harness::new(2, 1);
    let j = h.submit(true);
    assert!(h.place(j, "n0", 1, Harness::ready()));
    h.cut("n0");
    assert!(h.place(j, "n1", 1, Harness::ready()));
    // n0's shim ends attempt 1 while cut off; the report arrives after the rejoin.
    let out = h.event(Event::Ended {
        node: "n0".into(),
        job: j,
        attempt: 1,
        outcome: Outcome::decided(JobState::Completed, h.now, "done".into()),
    });
    assert_eq!(
        out[0],
        Effect::Ignored {
            job: j,
            attempt: 1,
            node: "n0".into(),
            why: Stale::Fenced { current: 2 }
        }
    );
    assert_eq!(h.store[&j].state, JobState::Running);
    assert_eq!(h.attempt_of(j), (2, Some("n1".into())));
    h.check().unwrap();
}

#[test]
fn a_report_about_an_attempt_is_taken_only_from_the_node_running_it() {
    let mut h = Harness::new(2, 1);
    let j = h.submit(true);
    assert!(h.place(j, "n0", 1, Harness::ready()));
    for forged in [
        Event::Ended {
            node: "n1".into(),
            job: j,
            attempt: 1,
            outcome: Outcome::decided(JobState::Completed, h.now, "forged".into()),
        },
        Event::NeverStarted {
            node: "n1".into(),
            job: j,
            attempt: 1,
            why: None,
        },
    ] {
        let out = h.event(forged);
        assert!(
            out.contains(&Effect::Ignored {
                job: j,
                attempt: 1,
                node: "n1".into(),
                why: Stale::OtherNode {
                    runs_on: "n0".into()
                }
            }),
            "{out:?}"
        );
        assert!(
            !out.iter()
                .any(|e| matches!(e, Effect::Persist { .. } | Effect::Release { .. })),
            "{out:?}"
        );
    }
    assert_eq!(h.store[&j].state, JobState::Running);
    assert_eq!(h.attempt_of(j), (1, Some("n0".into())));
    assert!(h.nodes["n0"].running.contains(&(j, 1)));
    h.finish("n0", j, 1, JobState::Completed);
    assert_eq!(h.store[&j].state, JobState::Completed);
    h.check().unwrap();
}

#[test]
fn a_lost_start_order_requeues_or_ends_a_cancelled_job() {
    let mut h = Harness::new(1, 2);
    let a = h.submit(true);
    let b = h.submit(true);
    assert!(h.place(a, "n0", 1, Harness::ready()));
    assert!(h.place(b, "n0", 1, Harness::ready()));
    h.event(Event::Cancel {
        job: b,
        by: "root".into(),
    });
    for job in [a, b] {
        h.nodes.get_mut("n0").unwrap().running.remove(&(job, 1));
        h.nodes.get_mut("n0").unwrap().outbox.clear();
        h.event(Event::NeverStarted {
            node: "n0".into(),
            job,
            attempt: 1,
            why: None,
        });
    }
    assert_eq!(h.store[&a].state, JobState::Pending);
    assert_eq!(h.store[&a].reason.as_deref(), Some("Requeued"));
    assert_eq!(h.store[&b].state, JobState::Cancelled);
    h.check().unwrap();
}

#[test]
fn pending_reasons_are_written_only_when_they_change() {
    let mut h = Harness::new(1, 1);
    let j = h.submit(true);
    let wait = || Event::Waiting {
        job: j,
        code: "Resources".into(),
        detail: "0/1 nodes fit: 1 gpu-count".into(),
    };
    assert_eq!(h.event(wait()).len(), 1);
    assert!(h.event(wait()).is_empty());
}

#[test]
fn requeue_kills_the_attempt_then_queues_the_job_again_and_a_cancel_wins() {
    let mut h = Harness::new(1, 2);
    let a = h.submit(true);
    let b = h.submit(true);
    assert!(h.place(a, "n0", 1, Harness::ready()));
    assert!(h.place(b, "n0", 1, Harness::ready()));
    h.now += 30_000;
    for job in [a, b] {
        let out = h.event(Event::Requeue {
            job,
            by: "alice".into(),
        });
        assert!(
            out.iter().any(|e| matches!(e, Effect::Kill { .. })),
            "{out:?}"
        );
    }
    // A second requeue while the first is under way changes nothing.
    assert!(
        h.event(Event::Requeue {
            job: a,
            by: "alice".into()
        })
        .is_empty()
    );
    h.event(Event::Cancel {
        job: b,
        by: "root".into(),
    });
    h.flush("n0");
    let l = &h.store[&a];
    assert_eq!(l.state, JobState::Pending);
    assert_eq!(l.reason_detail.as_deref(), Some("requeued by alice"));
    assert_eq!(
        h.requeue_charges[&a],
        vec![30_000],
        "charged for the time it ran"
    );
    assert_eq!(h.store[&b].state, JobState::Cancelled);
    assert!(h.place(a, "n0", 1, Harness::ready()));
    assert_eq!(h.attempt_of(a).0, 2);
    h.now += 10_000;
    h.finish("n0", a, 2, JobState::Completed);
    h.check().unwrap();
    // Each attempt is charged once, for the time it ran.
    assert_eq!(h.ledger[&a], vec![10_000]);
    assert_eq!(h.requeue_charges[&a], vec![30_000]);
    h.all_ended_once().unwrap();
}

#[test]
fn an_attempt_reported_lost_with_its_node_follows_the_node_down_rules() {
    // Slurm reports NODE_FAIL for the job itself: requeued, or NODE_FAIL with --no-requeue.
    let mut h = Harness::new(2, 1);
    let j = h.submit(true);
    let k = h.submit(false);
    assert!(h.place(j, "n0", 1, Harness::ready()));
    assert!(h.place(k, "n1", 1, Harness::ready()));
    h.now += 5_000;
    h.finish("n0", j, 1, JobState::NodeFail);
    h.finish("n1", k, 1, JobState::NodeFail);
    assert_eq!(h.store[&j].state, JobState::Pending);
    assert_eq!(h.store[&j].reason.as_deref(), Some("NodeFail"));
    assert_eq!(h.store[&k].state, JobState::NodeFail);
    assert!(h.place(j, "n1", 1, Harness::ready()));
    assert_eq!(h.attempt_of(j), (2, Some("n1".into())));
    h.finish("n1", j, 2, JobState::Completed);
    h.check().unwrap();
    h.all_ended_once().unwrap();
}

#[test]
fn a_job_whose_gpus_are_gone_after_a_restart_ends_node_fail_and_is_fenced() {
    let mut h = Harness::new(1, 2);
    let running = h.submit(true);
    let staging = h.submit(true);
    let waiting = h.submit(true);
    assert!(h.place(running, "n0", 1, Harness::ready()));
    assert!(h.place(staging, "n0", 1, Harness::data_stage()));
    h.now += 10_000;
    // The restart: every unfinished job is reloaded, and the shell finds that the new
    // configuration has no room for the placed ones (their node lost its GPUs).
    let mut life = Lifecycle::new();
    for (id, l) in &h.store {
        life.admit(*id, l.clone());
    }
    h.life = life;
    for job in [running, staging, waiting] {
        h.event(Event::Unrestorable {
            job,
            why: "node n0 has no GPU 1 any more".into(),
        });
    }
    let fence = h.life.recover(["n0"]);
    h.carry_out(&fence);
    h.flush("n0");
    for job in [running, staging] {
        let l = &h.store[&job];
        assert_eq!(l.state, JobState::NodeFail, "job {job}");
        assert_eq!(
            l.reason_detail.as_deref(),
            Some("node n0 has no GPU 1 any more")
        );
    }
    assert_eq!(
        h.store[&waiting].state,
        JobState::Pending,
        "a waiting job holds nothing: it waits again"
    );
    assert!(
        h.nodes["n0"].running.is_empty(),
        "the fence killed its copy"
    );
    assert!(h.held.is_empty());
    // A second word about an ended job changes nothing.
    let out = h.event(Event::Unrestorable {
        job: running,
        why: "again".into(),
    });
    assert!(out.is_empty());
    h.check().unwrap();
    assert_eq!(h.ends[&running], 1);
}

#[test]
fn a_placed_attempt_waits_for_its_data_then_its_environment_then_starts() {
    use labpool_lifecycle::{Lacks, Readiness, StageKind};
    let lacks = |data: Option<&str>, env: Option<&str>| Lacks {
        data: data.map(str::to_string),
        env: env.map(str::to_string),
        isolation: "devices".into(),
    };
    assert_eq!(
        Readiness::next(lacks(Some("staging imagenet@1"), Some("putting venv"))),
        Readiness::Stage(StageKind::Data, "staging imagenet@1".into())
    );
    assert_eq!(
        Readiness::next(lacks(None, Some("putting venv"))),
        Readiness::Stage(StageKind::Env, "putting venv".into())
    );
    assert_eq!(
        Readiness::next(lacks(None, None)),
        Readiness::Ready {
            isolation: "devices".into()
        }
    );
}
