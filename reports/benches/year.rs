//! Report generation for a year of history: 100,000 jobs of 40 members in 5 accounts on a
//! 64-GPU pool, with a ledger line per job; compute, then CSV and HTML, medians of 5 runs.
//!
//! ```text
//! cargo bench -p labpool-reports --bench year
//! ```
//!
//! No peer ran: Slurm's sreport needs slurmdbd with a year of accounting in MariaDB, which the
//! test cluster does not keep.

use labpool_reports::{Input, JobRecord, Leaderboard, LedgerRecord, compute, to_csv, to_html};
use std::time::Instant;

fn main() {
    const H: i64 = 3_600_000;
    let year = 365 * 24 * H;
    let mut rng = labpool_testkit::rng(1);
    let mut next = |m: u64| rng.u64(0..m);
    let jobs: Vec<JobRecord> = (0..100_000u64)
        .map(|id| {
            let submit = (next(year as u64)) as i64;
            let wait = next(4 * H as u64) as i64;
            let run = 60_000 + next(48 * H as u64) as i64;
            let user = next(40);
            JobRecord {
                id,
                user: format!("u{user:02}"),
                account: Some(format!("g{}", user % 5)),
                partition: ["normal", "debug", "long"][next(3) as usize].into(),
                gpu_type: ["a100", "rtx4090"][next(2) as usize].into(),
                gpus: [1, 1, 1, 2, 4, 8][next(6) as usize],
                slice: None,
                submit_ms: submit,
                start_ms: Some(submit + wait),
                end_ms: Some(submit + wait + run),
                state: ["COMPLETED", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"]
                    [next(5) as usize]
                    .into(),
                util_mean: (next(4) > 0).then(|| next(100) as f64),
                energy_j: Some(next(10_000_000) as f64),
            }
        })
        .collect();
    let ledger: Vec<LedgerRecord> = jobs
        .iter()
        .map(|j| LedgerRecord {
            time_ms: j.end_ms.unwrap_or(0),
            user: j.user.clone(),
            kind: "charge".into(),
            amount: 1.0,
        })
        .collect();
    let input = Input {
        from_ms: 0,
        to_ms: year,
        label: "a year".into(),
        pool_gpus: 64,
        jobs,
        ledger,
        leaderboard: Leaderboard::On,
        utc_offset_min: 480,
        storage: None,
        now_ms: None,
    };
    let mut times = Vec::new();
    let mut sizes = (0, 0);
    for _ in 0..5 {
        let t0 = Instant::now();
        let r = compute(&input);
        let (csv, html) = (to_csv(&r), to_html(&r));
        times.push(t0.elapsed().as_secs_f64());
        sizes = (csv.len(), html.len());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "a year, 100,000 jobs, 64 GPUs: report in {:.2} s (median of 5; CSV {} KiB, HTML {} KiB)",
        times[2],
        sizes.0 / 1024,
        sizes.1 / 1024
    );
}
