//! Properties of what an attempt owes (`Scheduler::settle`) over random nodes, GPU types,
//! weights, allocations, run times, rates and utilisations: a charge is each held GPU's hours
//! times its type's weight times the job's rate, a rebate is its fraction of the charge when
//! earned and never more; a requeued attempt pays only for what it ran, however long it then
//! waited; and the ledger balances: a month's balance is the grant plus grants and rebates
//! less charges, whatever the order of the entries.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::credits::{Entry, EntryKind, month_summary};
use labpool_scheduler::policy::Policy;
use labpool_scheduler::scheduler::Settlement;
use labpool_scheduler::{Allocation, JobSpec, Scheduler, Timestamp};
use proptest::prelude::*;

const TYPES: [&str; 3] = ["t4", "a100", "h100"];

/// A scheduler with one node of `gpus` (type indexes), weights per type, a preemptible rate
/// and a rebate.
fn pool(gpus: &[usize], weights: [f64; 3], rate: f64, rebate: f64) -> Scheduler {
    let mut policy = Policy::default();
    for (t, w) in TYPES.iter().zip(weights) {
        policy.credits.gpu_weights.insert(t.to_string(), w);
    }
    policy.credits.preemptible_rate = rate;
    policy.credits.rebate_fraction = rebate;
    policy.credits.rebate_min_util = 0.5;
    let mut s = Scheduler::with_policy(vec![partition("normal", true, 0, 86_400)], policy).unwrap();
    let types: Vec<&str> = gpus.iter().map(|i| TYPES[*i]).collect();
    s.upsert_node(node("n0", &types, 64)).unwrap();
    s
}

fn alloc(start_s: i64, gpus: Vec<u32>) -> Allocation {
    Allocation {
        start: Timestamp(start_s * 1000),
        node: "n0".into(),
        gpus,
        cpus: 1,
        mem_mib: 0,
        shared: false,
        units: 1,
        others: Vec::new(),
        ports: None,
    }
}

fn total(entries: &[Entry], kind: EntryKind) -> f64 {
    entries
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.amount)
        .sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// (GPU types of the node, weights, preemptible rate, rebate fraction)
fn pools() -> impl Strategy<Value = (Vec<usize>, [f64; 3], f64, f64)> {
    (
        prop::collection::vec(0usize..3, 1..8),
        [0.0f64..4.0, 0.0f64..4.0, 0.0f64..4.0],
        0.0f64..=1.0,
        0.0f64..=0.5,
    )
}

proptest! {
    #[test]
    fn a_charge_is_gpu_hours_by_weight_and_rate_and_a_rebate_never_exceeds_its_share(
        (types, weights, rate, rebate) in pools(),
        held in prop::collection::vec(any::<bool>(), 8),
        secs in 0i64..(30 * 86_400),
        preemptible in any::<bool>(),
        util in prop::option::of(0.0f64..=1.0),
    ) {
        let s = pool(&types, weights, rate, rebate);
        let gpus: Vec<u32> = (0..types.len() as u32).filter(|i| held[*i as usize]).collect();
        let job = JobSpec { preemptible, ..job(7, "ann", gpus.len() as u32, 86_400) };
        let a = alloc(1_000, gpus.clone());
        let entries = s.settle(&job, &a, Timestamp((1_000 + secs) * 1000), Settlement::Ended { gpu_util: util });
        let job_rate = if preemptible { rate } else { 1.0 };
        let expected: f64 = gpus.iter().map(|g| weights[types[*g as usize]] * secs as f64 / 3600.0).sum::<f64>() * job_rate;
        let charged = total(&entries, EntryKind::Charge);
        prop_assert!(close(charged, expected), "charged {charged}, expected {expected}");
        let rebated = total(&entries, EntryKind::Rebate);
        prop_assert!(rebated <= charged * 0.5 + 1e-9);
        let earned = util.is_some_and(|u| u >= 0.5) && rebate > 0.0;
        prop_assert_eq!(rebated > 0.0, earned && charged > 0.0);
        for e in &entries {
            prop_assert!(e.amount > 0.0 && e.amount.is_finite());
            prop_assert_eq!(e.job, Some(7));
            prop_assert_eq!(e.user.as_str(), "ann");
        }
    }

    #[test]
    fn a_requeued_attempt_pays_only_for_what_it_ran(
        (types, weights, rate, rebate) in pools(),
        first in 0i64..86_400,
        wait in 0i64..(7 * 86_400),
        second in 0i64..86_400,
    ) {
        let s = pool(&types, weights, rate, rebate);
        let gpus: Vec<u32> = (0..types.len() as u32).collect();
        let job = job(9, "ben", gpus.len() as u32, 86_400);
        let one = s.settle(&job, &alloc(0, gpus.clone()), Timestamp(first * 1000), Settlement::Requeued);
        prop_assert_eq!(total(&one, EntryKind::Rebate), 0.0, "a requeue earns no rebate");
        let start = first + wait;
        let two = s.settle(&job, &alloc(start, gpus.clone()), Timestamp((start + second) * 1000), Settlement::Ended { gpu_util: None });
        let whole = s.settle(&job, &alloc(0, gpus), Timestamp((first + second) * 1000), Settlement::Ended { gpu_util: None });
        let paid = total(&one, EntryKind::Charge) + total(&two, EntryKind::Charge);
        prop_assert!(close(paid, total(&whole, EntryKind::Charge)), "paid {paid} for {first}+{second} s, waited {wait} s unpaid");
    }

    #[test]
    fn the_ledger_balances_whatever_the_order(
        (types, weights, rate, rebate) in pools(),
        runs in prop::collection::vec((0i64..86_400, prop::option::of(0.0f64..=1.0), any::<bool>()), 1..20),
        grants in prop::collection::vec(0.0f64..500.0, 0..4),
        seed in any::<u64>(),
    ) {
        let s = pool(&types, weights, rate, rebate);
        let gpus: Vec<u32> = (0..types.len() as u32).collect();
        let mut entries = Vec::new();
        for (i, (secs, util, requeued)) in runs.iter().enumerate() {
            let job = job(i as u64 + 1, "cy", gpus.len() as u32, 86_400);
            let how = if *requeued { Settlement::Requeued } else { Settlement::Ended { gpu_util: *util } };
            entries.extend(s.settle(&job, &alloc(1_000, gpus.clone()), Timestamp((1_000 + secs) * 1000), how));
        }
        for g in &grants {
            entries.push(Entry { time: Timestamp(2_000_000), user: "cy".into(), kind: EntryKind::Grant, amount: *g, job: None, note: None });
        }
        let charged = total(&entries, EntryKind::Charge);
        let rebated = total(&entries, EntryKind::Rebate);
        let granted: f64 = grants.iter().sum();
        let mut shuffled = entries.clone();
        fastrand::Rng::with_seed(seed).shuffle(&mut shuffled);
        let m = month_summary(&s.policy().credits, &shuffled, "cy", Timestamp(0), Timestamp(i64::MAX));
        prop_assert!(close(m.charged, charged) && close(m.rebated, rebated) && close(m.granted, granted));
        prop_assert!(close(m.balance, m.monthly_grant + granted + rebated - charged));
        let other = month_summary(&s.policy().credits, &shuffled, "di", Timestamp(0), Timestamp(i64::MAX));
        prop_assert!(close(other.balance, other.monthly_grant), "another member's entries are not cy's");
    }
}
