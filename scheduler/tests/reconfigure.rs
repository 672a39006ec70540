//! A running scheduler takes new partitions and a new policy (the controller's config
//! reloaded): a longer limit admits a job the old one refused, and a partition that still
//! holds jobs cannot be taken away.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::JobSpec;
use labpool_scheduler::policy::Policy;
use labpool_scheduler::scheduler::ReconfigureError;

#[test]
fn new_partitions_apply_to_the_next_job_and_one_holding_jobs_stays() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 8)).unwrap();
    s.enqueue(JobSpec {
        partition: "high".into(),
        ..job(1, "u", 1, H)
    });
    assert_eq!(
        s.partitions()
            .iter()
            .find(|p| p.name == "high")
            .unwrap()
            .priority,
        10
    );

    // Taking "high" away while job 1 waits in it is refused, and nothing changes.
    let without_high = vec![partition("normal", true, 0, 2 * 86_400)];
    let e = s
        .reconfigure(without_high.clone(), Policy::default())
        .unwrap_err();
    assert_eq!(
        e,
        ReconfigureError::InUse {
            partition: "high".into(),
            jobs: "1".into()
        }
    );
    assert_eq!(s.partitions().len(), 2);

    // Two defaults are refused as at start.
    let two_defaults = vec![
        partition("normal", true, 0, H),
        partition("high", true, 0, H),
    ];
    assert!(matches!(
        s.reconfigure(two_defaults, Policy::default()),
        Err(ReconfigureError::Partitions(_))
    ));

    // A new priority and limit apply from now on.
    let mut longer = vec![
        partition("normal", true, 0, 2 * 86_400),
        partition("high", false, 99, H),
    ];
    longer[1].max_gpus_per_job = Some(1);
    s.reconfigure(longer, Policy::default()).unwrap();
    let high = s.partitions().iter().find(|p| p.name == "high").unwrap();
    assert_eq!((high.priority, high.max_gpus_per_job), (99, Some(1)));
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);

    // Once job 1 has ended, "high" may go.
    end(&mut s, 1, at(0.5));
    s.reconfigure(without_high, Policy::default()).unwrap();
    assert_eq!(s.partitions().len(), 1);
}
