//! The priority order: credit tiers (in credit, overdrawn, emergency), credit accrual while
//! jobs run, and fair-share.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::priority::Tier;
use labpool_scheduler::{JobId, JobSpec, Scheduler};

#[test]
fn an_overdrawn_user_runs_only_on_idle_gpus() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 2], 16)).unwrap();
    s.set_balance("spent", -5.0);
    s.enqueue(job(1, "spent", 1, H));
    s.enqueue(job(2, "spent", 1, H));
    s.enqueue(job(3, "fresh", 1, H));
    s.enqueue(job(4, "fresh", 1, H));
    // The overdrawn user submitted first, but the GPUs go to the user in credit.
    assert_eq!(ids(&s.schedule(at(0.0))), [3, 4]);
    assert_eq!(s.explain(JobId(1)).unwrap().factors.tier, Tier::Overdrawn);
    // Once nobody in credit wants them, the idle GPUs go to the overdrawn user.
    end(&mut s, 3, at(0.5));
    assert_eq!(ids(&s.schedule(at(0.5))), [1]);
}

#[test]
fn credit_accrues_while_jobs_run() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 4], 16)).unwrap();
    s.set_balance("u", 3.0);
    s.enqueue(job(1, "u", 2, 10 * H));
    s.schedule(at(0.0));
    s.enqueue(job(2, "u", 2, H));
    // 2 GPUs for 1 h cost 2 credits at weight 1, for 2 h 4: the balance of 3 is spent by then.
    let tier = |s: &Scheduler, h| {
        s.priority_order_at(at(h))
            .into_iter()
            .find(|(id, _)| *id == JobId(2))
            .unwrap()
            .1
            .tier
    };
    assert_eq!(tier(&s, 1.0), Tier::InCredit);
    assert_eq!(tier(&s, 2.0), Tier::Overdrawn);
    assert!((s.accrued("u", at(2.0)) - 4.0).abs() < 1e-9);
}

#[test]
fn an_emergency_job_jumps_the_queue() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 1], 16)).unwrap();
    s.enqueue(job(1, "a", 1, H));
    s.schedule(at(0.0));
    s.enqueue(job(2, "b", 1, H));
    s.enqueue(job(3, "c", 1, H));
    s.enqueue(JobSpec {
        emergency: true,
        ..job(4, "d", 1, H)
    });
    s.schedule(at(0.1));
    assert_eq!(s.explain(JobId(4)).unwrap().factors.tier, Tier::Emergency);
    assert_eq!(s.explain(JobId(4)).unwrap().position, 1);
    end(&mut s, 1, at(0.2));
    assert_eq!(ids(&s.schedule(at(0.2))), [4]);
}

#[test]
fn fairshare_puts_light_users_first() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 1], 16)).unwrap();
    s.record_usage("heavy", 1e6, at(0.0));
    s.enqueue(job(1, "heavy", 1, H));
    s.enqueue(job(2, "light", 1, H));
    let order = s.priority_order(at(0.0));
    assert_eq!(order, [JobId(2), JobId(1)]);
    let heavy = s
        .priority_order_at(at(0.0))
        .into_iter()
        .find(|(id, _)| *id == JobId(1))
        .unwrap()
        .1;
    assert!(heavy.fairshare < 0.5, "{heavy:?}");
}

#[test]
fn fairshare_counts_jobs_still_running() {
    let mut s = sched();
    s.upsert_node(node("box", &["t4"; 8], 16)).unwrap();
    s.enqueue(job(1, "busy", 8, 100 * H));
    s.schedule(at(0.0));
    s.enqueue(job(2, "busy", 1, H));
    s.enqueue(job(3, "idle", 1, H));
    // Three days on 8 GPUs and nothing finished yet: busy is not a light user.
    let order = s.priority_order_at(at(72.0));
    assert_eq!(order[0].0, JobId(3));
    assert!(order[1].1.fairshare < 0.5, "{:?}", order[1].1);
}
