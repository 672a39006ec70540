//! Over random histories, every count in a report agrees with every other: jobs by outcome sum
//! to the job count; GPU-hours and jobs by user, account, GPU type and partition sum to the
//! total; utilisation is the total over the pool's hours; and no day after now holds use.

use labpool_reports::compute::date_of_day;
use labpool_reports::{Input, JobRecord, Leaderboard, Report, compute};
use proptest::prelude::*;

const H: i64 = 3_600_000;
const DAY: i64 = 24 * H;

/// (user, account, partition, type, GPUs, submit h, wait h or none, run h or none, ended state)
type Raw = (u8, u8, u8, u8, u32, i64, Option<i64>, Option<i64>, u8);

fn history(raw: Vec<Raw>, now: i64) -> Vec<JobRecord> {
    raw.into_iter()
        .enumerate()
        .filter(|(_, r)| r.5 * H <= now)
        .map(|(i, (u, a, p, t, gpus, submit, wait, run, s))| {
            let submit_ms = submit * H;
            // A job starts after it waits, or never (and may be cancelled while it waits).
            let start_ms = wait.map(|w| submit_ms + w * H).filter(|s| *s <= now);
            let end_ms = match (start_ms, run) {
                (Some(st), Some(r)) => Some(st + r * H),
                (None, Some(r)) => Some(submit_ms + r * H),
                _ => None,
            }
            .filter(|e| *e <= now);
            let state = match (start_ms, end_ms) {
                (_, Some(_)) => ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"][s as usize % 4],
                (Some(_), None) => "RUNNING",
                (None, None) => "PENDING",
            };
            JobRecord {
                id: i as u64 + 1,
                user: ["alice", "bob", "carol"][u as usize % 3].into(),
                account: [None, Some("vision".into())][a as usize % 2].clone(),
                partition: ["normal", "debug"][p as usize % 2].into(),
                gpu_type: ["a100", "t4"][t as usize % 2].into(),
                gpus,
                slice: None,
                submit_ms,
                start_ms,
                end_ms,
                state: state.into(),
                util_mean: (t % 2 == 0).then_some(f64::from(u % 100)),
                energy_j: None,
            }
        })
        .collect()
}

fn sums(rows: &[labpool_reports::UseRow]) -> (u64, f64) {
    (
        rows.iter().map(|r| r.jobs).sum(),
        rows.iter().map(|r| r.gpu_hours).sum(),
    )
}

fn check(r: &Report, pool_gpus: u32) {
    let outcomes: u64 = r.outcomes.iter().map(|(_, n)| n).sum();
    assert_eq!(outcomes, r.jobs, "jobs by outcome sum to the job count");
    assert!(r.total.jobs <= r.jobs);
    for (name, rows) in [
        ("user", &r.by_user),
        ("account", &r.by_account),
        ("GPU type", &r.by_gpu_type),
        ("partition", &r.by_partition),
    ] {
        let (jobs, hours) = sums(rows);
        assert_eq!(jobs, r.total.jobs, "jobs by {name}");
        assert!(
            (hours - r.total.gpu_hours).abs() < 1e-3,
            "GPU-hours by {name}: {hours} against {}",
            r.total.gpu_hours
        );
    }
    let pool_hours = f64::from(pool_gpus) * (r.until_ms - r.from_ms) as f64 / H as f64;
    if pool_hours > 0.0 {
        let util = 100.0 * r.total.gpu_hours / pool_hours;
        assert!(
            (util - r.utilisation).abs() <= 0.05 + 1e-9,
            "{util} against {}",
            r.utilisation
        );
    }
    assert!(r.idle_with_demand_gpu_hours <= pool_hours + 1e-6);
    if let Some(board) = &r.leaderboard {
        assert_eq!(board.iter().map(|l| l.jobs).sum::<u64>(), r.total.jobs);
    }
    let waits: u64 = r.waits_by_partition.iter().map(|w| w.jobs).sum();
    assert!(waits <= r.jobs, "a wait is counted for a job of the range");
    let last_day = date_of_day((r.until_ms - 1).div_euclid(DAY));
    for (day, pct) in &r.by_day {
        assert!(
            *day <= last_day,
            "{day} is after {last_day}, the day of now"
        );
        assert!(*pct >= 0.0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn a_reports_counts_agree_with_each_other(
        raw in prop::collection::vec(
            (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), 0u32..9, 0i64..960,
             prop::option::of(0i64..100), prop::option::of(0i64..200), any::<u8>()),
            0..40,
        ),
        from_day in 0i64..20,
        days in 1i64..31,
        now_h in 0i64..1200,
        pool_gpus in 1u32..17,
    ) {
        let now = now_h * H;
        let input = Input {
            from_ms: from_day * DAY,
            to_ms: (from_day + days) * DAY,
            label: "range".into(),
            pool_gpus,
            jobs: history(raw, now),
            leaderboard: Leaderboard::On,
            now_ms: Some(now),
            ..Input::default()
        };
        let r = compute(&input);
        prop_assert!(r.until_ms <= now.max(input.from_ms) && r.until_ms <= input.to_ms);
        check(&r, pool_gpus);
    }
}
