//! The submit rate as the queue fills: 16 API submitters (labpool) against 16 parallel
//! `sbatch` (Slurm), with 0, 1k, 4k, 10k and 20k jobs already pending behind a job that holds
//! every GPU. Both queues are filled with single jobs (not arrays, whose tasks a scheduler may
//! keep as one record), submitted 16 at a time; Slurm's are held back.

use crate::{Labpool, Slurm};
use std::time::Instant;

/// The depths swept, in pending jobs.
pub const DEPTHS: [usize; 5] = [0, 1_000, 4_000, 10_000, 20_000];

/// One depth's figures: submits per second, labpool and Slurm (when it runs).
pub struct DepthRow {
    /// Jobs pending before the timed submits.
    pub depth: usize,
    /// labpool's rate.
    pub labpool: f64,
    /// Slurm's rate.
    pub slurm: Option<f64>,
}

impl Labpool {
    /// Tops the queue up to `depth` pending jobs, single jobs from 16 submitters.
    fn fill(&self, have: usize, depth: usize, ids: &mut Vec<u64>) {
        if depth > have {
            ids.extend(self.timed_submits(depth - have, 16).1);
        }
    }

    /// Submits per second at each depth.
    pub fn depth_sweep(&self, n: usize, conc: usize) -> Vec<f64> {
        let blocker = self.submit_api(2, "sleep 600");
        let mut filler = vec![blocker];
        let mut have = 0;
        let mut rates = Vec::new();
        for depth in DEPTHS {
            self.fill(have, depth, &mut filler);
            have = depth;
            let ids = self.timed_submits(n, conc);
            rates.push(n as f64 / ids.0);
            self.cancel_all(ids.1);
        }
        self.cancel_all(filler);
        rates
    }
}

impl Slurm {
    /// Submits per second at each depth.
    pub fn depth_sweep(&self, n: usize, conc: usize) -> Vec<f64> {
        self.sbatch(&["--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 600"]);
        let mut have = 0;
        let mut rates = Vec::new();
        for depth in DEPTHS {
            self.parallel_sbatch(depth - have, conc, &["--hold"]);
            have = depth;
            let t0 = Instant::now();
            let ids = self.parallel_sbatch(n, conc, &[]);
            rates.push(n as f64 / t0.elapsed().as_secs_f64());
            let list: Vec<String> = ids.iter().map(u64::to_string).collect();
            for chunk in list.chunks(500) {
                let _ = self.cmd("scancel").args(chunk).status();
            }
        }
        self.cancel_all();
        rates
    }

    /// `n` one-GPU `sbatch --wrap true` from `conc` threads at once; their ids.
    fn parallel_sbatch(&self, n: usize, conc: usize, extra: &[&str]) -> Vec<u64> {
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..conc)
                .map(|w| {
                    let count = n / conc + usize::from(w < n % conc);
                    s.spawn(move || {
                        let mut args = vec!["--gres=gpu:1", "-o", "/dev/null"];
                        args.extend_from_slice(extra);
                        args.extend(["--wrap", "true"]);
                        (0..count).map(|_| self.sbatch(&args)).collect::<Vec<u64>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        })
    }
}

/// Prints the sweep as a table with ratios: each rate against labpool's own at depth 0, and
/// labpool against Slurm at the same depth.
pub fn print(rows: &[DepthRow], n: usize, conc: usize) {
    println!();
    println!("submit rate by queue depth: {n} jobs, {conc} concurrent submitters");
    println!(
        "| pending before | labpool | of labpool at 0 | Slurm | of Slurm at 0 | labpool / Slurm |"
    );
    println!("|---|---|---|---|---|---|");
    let (lp0, sl0) = (rows[0].labpool, rows[0].slurm);
    for r in rows {
        let slurm = match (r.slurm, sl0) {
            (Some(s), Some(s0)) => format!(
                "{s:.0} jobs/s | {:.0}% | {:.1}x",
                100.0 * s / s0,
                r.labpool / s
            ),
            _ => "- | - | -".to_string(),
        };
        println!(
            "| {} | {:.0} jobs/s | {:.0}% | {slurm} |",
            r.depth,
            r.labpool,
            100.0 * r.labpool / lp0
        );
    }
}
