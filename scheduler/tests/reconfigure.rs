//! A running scheduler takes new partitions and a new policy (the controller's config
//! reloaded): a longer limit admits a job the old one refused, a new priority applies to the
//! next pass, and a partition that still holds jobs cannot be taken away.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::policy::Policy;
use labpool_scheduler::scheduler::ReconfigureError;
use labpool_scheduler::time::TimeLimit;

#[test]
fn new_partitions_apply_to_the_next_job_and_one_holding_jobs_stays() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 8)).unwrap();
    let one = res(1, None);
    let two_hours = TimeLimit::Seconds(2 * H);
    let mut asked = req("u", &one);
    asked.partition = Some("high");
    asked.time_limit = Some(two_hours);
    assert!(
        s.admit(&asked).is_err(),
        "high takes at most 1 h before the reload"
    );
    submit(&mut s, 1, res(1, None), Some("high"));

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

    // A longer limit and a new priority apply from now on.
    let longer = vec![
        partition("normal", true, 0, 2 * 86_400),
        partition("high", false, 99, 3 * H),
    ];
    s.reconfigure(longer, Policy::default()).unwrap();
    let admitted = s.admit(&asked).expect("admitted after the reload");
    assert_eq!(admitted.time_limit, two_hours);
    let high = s.partitions().iter().find(|p| p.name == "high").unwrap();
    assert_eq!(high.priority, 99);
    assert_eq!(ids(&s.schedule(at(0.0))), [1]);

    // Once job 1 has ended, "high" may go.
    end(&mut s, 1, at(0.5));
    s.reconfigure(without_high, Policy::default()).unwrap();
    assert_eq!(s.partitions().len(), 1);
}
