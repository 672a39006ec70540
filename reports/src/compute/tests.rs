//! A small history whose answers were worked out by hand (times in hours, a 4-GPU pool, the
//! range 0h to 10h):
//!
//! | job | user | GPUs | submit | start | end | state | util |
//! | --- | --- | --- | --- | --- | --- | --- | --- |
//! | 1 | alice (vision), normal, a100 | 2 | 0 | 0 | 4 | COMPLETED | 50% |
//! | 2 | bob, normal, a100 | 2 | 1 | 4 | 6 | FAILED | - |
//! | 3 | alice (vision), debug, t4 | 1 | 2 | 2 | 12 | RUNNING past the range | 100% |
//! | 4 | carol, normal, a100 | 2 | 5 | - | - | PENDING | - |
//! | 5 | bob, debug, no GPU | 0 | 0 | 1 | 2 | COMPLETED | - |

use super::*;

const H: i64 = 3_600_000;

fn job(
    id: u64,
    user: &str,
    account: Option<&str>,
    partition: &str,
    gpu_type: &str,
    gpus: u32,
) -> JobRecord {
    JobRecord {
        id,
        user: user.into(),
        account: account.map(Into::into),
        partition: partition.into(),
        gpu_type: gpu_type.into(),
        gpus,
        ..JobRecord::default()
    }
}

fn fixture(board: Leaderboard) -> Input {
    let mut j1 = job(1, "alice", Some("vision"), "normal", "a100", 2);
    (j1.start_ms, j1.end_ms, j1.state, j1.util_mean, j1.energy_j) = (
        Some(0),
        Some(4 * H),
        "COMPLETED".into(),
        Some(50.0),
        Some(3.6e6),
    );
    let mut j2 = job(2, "bob", None, "normal", "a100", 2);
    (j2.submit_ms, j2.start_ms, j2.end_ms, j2.state) =
        (H, Some(4 * H), Some(6 * H), "FAILED".into());
    let mut j3 = job(3, "alice", Some("vision"), "debug", "t4", 1);
    (j3.submit_ms, j3.start_ms, j3.end_ms, j3.state, j3.util_mean) = (
        2 * H,
        Some(2 * H),
        Some(12 * H),
        "COMPLETED".into(),
        Some(100.0),
    );
    let mut j4 = job(4, "carol", None, "normal", "a100", 2);
    (j4.submit_ms, j4.state) = (5 * H, "PENDING".into());
    let mut j5 = job(5, "bob", None, "debug", "-", 0);
    (j5.start_ms, j5.end_ms, j5.state) = (Some(H), Some(2 * H), "COMPLETED".into());
    let ledger = |t: i64, user: &str, kind: &str, amount: f64| LedgerRecord {
        time_ms: t,
        user: user.into(),
        kind: kind.into(),
        amount,
    };
    Input {
        from_ms: 0,
        to_ms: 10 * H,
        label: "fixture".into(),
        pool_gpus: 4,
        jobs: vec![j1, j2, j3, j4, j5],
        ledger: vec![
            ledger(H, "alice", "grant", 100.0),
            ledger(3 * H, "bob", "emergency_token", 0.0),
            ledger(4 * H, "alice", "charge", 8.0),
            ledger(4 * H, "alice", "rebate", 0.8),
            ledger(11 * H, "bob", "charge", 5.0),
        ],
        leaderboard: board,
        utc_offset_min: 0,
        storage: Some(Storage {
            quotas: vec![QuotaLine {
                user: "alice".into(),
                fs: "scratch".into(),
                used_bytes: 3 << 30,
                soft_bytes: None,
                hard_bytes: Some(4 << 30),
            }],
            snapshot_logical_bytes: Some(10 << 30),
            snapshot_stored_bytes: Some(4 << 30),
            last_purge: Some((2 * H, 7, 1 << 20)),
        }),
        now_ms: None,
    }
}

#[test]
fn a_slice_counts_its_part_of_the_card() {
    let mut input = fixture(Leaderboard::On);
    // Job 3 held a quarter of its t4: 8 hours of it are 2 GPU-hours, not 8.
    input.jobs[2].slice = Some(0.25);
    let r = compute(&input);
    assert_eq!(r.total.gpu_hours, 14.0);
}

#[test]
fn gpu_hours_use_and_utilisation_match_the_hand_computation() {
    let r = compute(&fixture(Leaderboard::On));
    // 2x4 + 2x2 + 1x8 (job 3 clipped at the range's end); job 5 holds no GPU.
    assert_eq!((r.total.jobs, r.total.gpu_hours), (3, 20.0));
    assert_eq!(r.utilisation, 50.0, "20 of 4 x 10 GPU-hours");
    let users: Vec<(&str, f64, f64, f64)> = r
        .by_user
        .iter()
        .map(|u| {
            (
                u.key.as_str(),
                u.gpu_hours,
                u.used_gpu_hours,
                u.sampled_gpu_hours,
            )
        })
        .collect();
    assert_eq!(users, [("alice", 16.0, 12.0, 16.0), ("bob", 4.0, 0.0, 0.0)]);
    let keys = |rows: &[UseRow]| {
        rows.iter()
            .map(|r| (r.key.clone(), r.gpu_hours))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(&r.by_gpu_type),
        [("a100".into(), 12.0), ("t4".into(), 8.0)]
    );
    assert_eq!(
        keys(&r.by_partition),
        [("normal".into(), 12.0), ("debug".into(), 8.0)]
    );
    assert_eq!(
        keys(&r.by_account),
        [("vision".into(), 16.0), ("-".into(), 4.0)]
    );
    assert_eq!(r.by_day, [("1970-01-01".to_string(), 50.0)]);
    assert!(!r.allocation_only);
}

#[test]
fn idle_with_demand_waits_outcomes_credits_and_energy() {
    let r = compute(&fixture(Leaderboard::On));
    // 1-2h: 2 idle, 2 asked -> 2; 2-4h: 1 idle -> 2; 5-6h: 1 idle -> 1; 6-10h: 3 idle, 2 asked -> 8.
    assert_eq!(r.idle_with_demand_gpu_hours, 13.0);
    let w = |rows: &[WaitRow]| {
        rows.iter()
            .map(|w| (w.key.clone(), w.jobs, w.p50_s, w.p90_s, w.p95_s))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        w(&r.waits_by_partition),
        [
            ("debug".into(), 2, 0, 3600, 3600),
            ("normal".into(), 2, 0, 10800, 10800)
        ]
    );
    assert_eq!(
        w(&r.waits_by_size),
        [
            ("0 GPUs".into(), 1, 3600, 3600, 3600),
            ("1 GPU".into(), 1, 0, 0, 0),
            ("2-4 GPUs".into(), 2, 0, 10800, 10800)
        ]
    );
    // Job 3 still ran at the range's end and job 4 still waited.
    assert_eq!(
        r.outcomes,
        [
            ("COMPLETED".into(), 2),
            ("FAILED".into(), 1),
            ("PENDING".into(), 1),
            ("RUNNING".into(), 1)
        ]
    );
    assert_eq!(r.jobs, 5);
    assert_eq!(
        r.credits,
        CreditRow {
            charged: 8.0,
            granted: 100.0,
            rebated: 0.8,
            emergency_tokens: 1
        }
    );
    assert_eq!(r.energy_kwh, Some(1.0));
    assert_eq!(r.storage.as_ref().and_then(|s| s.dedup_ratio()), Some(2.5));
}

#[test]
fn the_leaderboard_ranks_names_or_numbers_or_is_off() {
    let r = compute(&fixture(Leaderboard::On));
    let board = r.leaderboard.unwrap();
    assert_eq!(
        (board[0].user.as_str(), board[0].util),
        ("alice", Some(75.0))
    );
    assert_eq!((board[1].user.as_str(), board[1].util), ("bob", None));
    assert_eq!(r.efficiency.unwrap().len(), 1, "bob was never sampled");
    let anon = compute(&fixture(Leaderboard::Anonymous))
        .leaderboard
        .unwrap();
    assert_eq!(anon[0].user, "member 1");
    assert!(compute(&fixture(Leaderboard::Off)).leaderboard.is_none());
}

/// An anonymous leaderboard leaves no name anywhere in the report: not in the by-user table,
/// not in the storage lines, in any of its formats.
#[test]
fn an_anonymous_report_names_no_member_anywhere() {
    let r = compute(&fixture(Leaderboard::Anonymous));
    assert_eq!(r.by_user[0].key, "member 1");
    for text in [
        serde_json::to_string(&r).unwrap(),
        crate::to_html(&r),
        crate::to_csv(&r),
    ] {
        for name in ["alice", "bob"] {
            assert!(!text.contains(name), "{name} is named:\n{text}");
        }
    }
}

#[test]
fn percentiles_are_nearest_rank_and_dates_are_civil() {
    let v: Vec<i64> = (1..=20).collect();
    assert_eq!(
        (
            percentile(&v, 0.5),
            percentile(&v, 0.9),
            percentile(&v, 0.95)
        ),
        (10, 18, 19)
    );
    assert_eq!(date_of_day(20_422), "2025-11-30");
    assert_eq!(date_of_day(-1), "1969-12-31");
}

#[test]
fn csv_reads_back_and_html_is_one_page_with_its_charts() {
    let r = compute(&fixture(Leaderboard::On));
    let csv = crate::to_csv(&r);
    let find = |section: &str, key: &str, metric: &str| -> String {
        csv.lines()
            .find(|l| l.starts_with(&format!("{section},{key},{metric},")))
            .and_then(|l| l.rsplit(',').next())
            .unwrap_or_else(|| panic!("{section},{key},{metric} missing:\n{csv}"))
            .to_string()
    };
    assert_eq!(find("use_by_user", "alice", "gpu_hours"), "16");
    assert_eq!(find("pool", "all", "idle_with_demand_gpu_hours"), "13");
    assert_eq!(find("waits_by_partition", "normal", "p90_s"), "10800");
    assert_eq!(find("storage_snapshots", "all", "dedup_ratio"), "2.50");
    assert_eq!(
        find("storage_quota", "alice/scratch", "hard_bytes"),
        "4294967296"
    );
    assert!(csv.lines().all(|l| l.split(',').count() == 4), "{csv}");
    let html = crate::to_html(&r);
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    assert_eq!(
        html.matches("<svg").count(),
        3,
        "utilisation by day, by user, by outcome"
    );
    assert!(!html.contains("<script"));
    assert!(
        html.contains("save 2.5x") && html.contains("reclaimed 1M in 7 files"),
        "{html}"
    );
    assert!(!html.contains("src="), "no outside fetch");
    assert_eq!(
        html,
        crate::to_html(&compute(&fixture(Leaderboard::On))),
        "same input, same bytes"
    );
}

#[test]
fn the_forecast_spreads_a_daily_habit_over_weekdays_and_hours() {
    // Three weeks from Thursday 1970-01-01, 2 GPUs for an hour at 10:00 UTC every day.
    let day = 24 * H;
    let jobs = (0..21)
        .map(|d| {
            let mut j = job(d as u64 + 1, "alice", None, "normal", "a100", 2);
            (j.submit_ms, j.start_ms, j.end_ms, j.state) = (
                d * day + 10 * H,
                Some(d * day + 10 * H),
                Some(d * day + 11 * H),
                "COMPLETED".into(),
            );
            j
        })
        .collect();
    let input = Input {
        from_ms: 0,
        to_ms: 21 * day,
        pool_gpus: 4,
        jobs,
        ..Input::default()
    };
    let f = compute(&input)
        .forecast
        .expect("three weeks make a forecast");
    assert_eq!(f.trend_per_week, 0.0);
    assert_eq!(f.next_30_days_gpu_hours, 60.0, "2 GPU-hours a day, 30 days");
    assert!(
        f.by_weekday.iter().all(|(_, v)| *v == 2.0),
        "{:?}",
        f.by_weekday
    );
    assert_eq!(f.by_weekday[0].0, "Mon");
    // Smoothed over the neighbouring hours: half at 10:00, a quarter either side, times 7 days.
    assert_eq!(
        (f.by_hour[9].1, f.by_hour[10].1, f.by_hour[11].1),
        (3.5, 7.0, 3.5)
    );
    let short = Input {
        to_ms: 13 * day,
        ..input
    };
    assert!(compute(&short).forecast.is_none());
}

/// A month in progress, worked by hand (a 4-GPU pool, the range 30 days from 0h, now 50h):
///
/// | job | user | GPUs | submit | start | end | state |
/// | --- | --- | --- | --- | --- | --- | --- |
/// | 1 | alice | 2 | 0 | 1 | - | RUNNING |
/// | 2 | bob | 4 | 10 | - | 12 | CANCELLED while pending |
/// | 3 | carol | 1 | 20 | 20 | 30 | COMPLETED |
/// | 4 | bob | 1 | 49 | - | - | PENDING |
/// | 5 | alice | 0 | 5 | 5 | 6 | FAILED |
///
/// Nothing after now is counted: job 1 holds 2 GPUs for 49 h, not to the month's end; job 2
/// stops wanting GPUs when it is cancelled.
#[test]
fn a_month_in_progress_ends_now_and_a_cancelled_job_stops_wanting_gpus() {
    let mut jobs = vec![
        job(1, "alice", None, "normal", "a100", 2),
        job(2, "bob", None, "normal", "a100", 4),
        job(3, "carol", None, "normal", "a100", 1),
        job(4, "bob", None, "normal", "a100", 1),
        job(5, "alice", None, "debug", "-", 0),
    ];
    (jobs[0].start_ms, jobs[0].state) = (Some(H), "RUNNING".into());
    (jobs[1].submit_ms, jobs[1].end_ms, jobs[1].state) = (10 * H, Some(12 * H), "CANCELLED".into());
    (
        jobs[2].submit_ms,
        jobs[2].start_ms,
        jobs[2].end_ms,
        jobs[2].state,
    ) = (20 * H, Some(20 * H), Some(30 * H), "COMPLETED".into());
    (jobs[3].submit_ms, jobs[3].state) = (49 * H, "PENDING".into());
    (
        jobs[4].submit_ms,
        jobs[4].start_ms,
        jobs[4].end_ms,
        jobs[4].state,
    ) = (5 * H, Some(5 * H), Some(6 * H), "FAILED".into());
    let input = Input {
        from_ms: 0,
        to_ms: 30 * 24 * H,
        label: "1970-01".into(),
        pool_gpus: 4,
        jobs,
        now_ms: Some(50 * H),
        ..Input::default()
    };
    let r = compute(&input);
    assert_eq!(r.label, "1970-01 (to 1970-01-03 02:00)");
    assert_eq!(r.until_ms, 50 * H);
    // 2 x 49 h (job 1, to now) + 1 x 10 h (job 3).
    assert_eq!((r.total.jobs, r.total.gpu_hours), (2, 108.0));
    let users: Vec<(&str, u64, f64)> = r
        .by_user
        .iter()
        .map(|u| (u.key.as_str(), u.jobs, u.gpu_hours))
        .collect();
    assert_eq!(users, [("alice", 1, 98.0), ("carol", 1, 10.0)]);
    assert_eq!(r.utilisation, 54.0, "108 of 4 x 50 GPU-hours");
    // 0-1 h: 4 idle, job 1 asks 2 -> 2; 10-12 h: 2 idle, job 2 asks 4 -> 4; 49-50 h: 2 idle,
    // job 4 asks 1 -> 1.
    assert_eq!(r.idle_with_demand_gpu_hours, 7.0);
    // Day 1: 2 x 23 + 1 x 4 = 50 of 96; day 2: 2 x 24 + 1 x 6 = 54 of 96; day 3 to 02:00: 4 of 8.
    assert_eq!(
        r.by_day,
        [
            ("1970-01-01".to_string(), 52.1),
            ("1970-01-02".to_string(), 56.3),
            ("1970-01-03".to_string(), 50.0)
        ]
    );
    assert_eq!(r.jobs, 5);
    assert_eq!(
        r.outcomes,
        [
            ("CANCELLED".into(), 1),
            ("COMPLETED".into(), 1),
            ("FAILED".into(), 1),
            ("PENDING".into(), 1),
            ("RUNNING".into(), 1)
        ]
    );
    assert!(r.forecast.is_none(), "50 hours make no forecast");
    let html = crate::to_html(&r);
    assert!(
        html.contains("5 jobs in the range, 2 of them held GPUs: 108.0 GPU-hours, 54.0% of the pool. 7.0 GPU-hours left idle"),
        "{html}"
    );
    assert!(
        html.contains(">1</text>") && !html.contains(">1.0</text>"),
        "counts are whole: {html}"
    );
}

#[test]
fn a_csv_field_with_a_comma_or_a_quote_is_quoted_and_reads_back_whole() {
    let mut r = compute(&fixture(Leaderboard::On));
    r.label = "Q1, the \"spring\" term".to_string();
    let csv = crate::to_csv(&r);
    assert!(
        csv.contains("range,\"Q1, the \"\"spring\"\" term\",from_ms,"),
        "{csv}"
    );
    let mut reader = ::csv::Reader::from_reader(csv.as_bytes());
    let first = reader.records().next().unwrap().unwrap();
    assert_eq!(&first[1], "Q1, the \"spring\" term");
    assert!(reader.records().all(|rec| rec.unwrap().len() == 4));
}
