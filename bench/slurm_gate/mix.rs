//! The replayed mix: seeded datasets of random bytes under the shared datasets root, and the job
//! list both sides get (same seed, same order, same arrival times, same datasets).

use crate::common::xorshift;
use std::path::{Path, PathBuf};

/// One dataset on shared storage.
pub struct Dataset {
    pub name: String,
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
}

/// One job of the mix.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its index in the mix (0..).
    pub index: usize,
    /// The dataset it reads (an index into the datasets).
    pub dataset: usize,
    /// Seconds after the first submission at which it is submitted.
    pub at: f64,
}

/// A uniform draw in [0, 1).
fn unit(x: &mut u64) -> f64 {
    (xorshift(x) >> 11) as f64 / (1u64 << 53) as f64
}

/// `count` datasets `ds0..` of `files` files each, `mb` MB per dataset (file sizes vary from
/// half to one and a half times the mean), random bytes, under `root`.
pub fn make_datasets(root: &Path, count: usize, files: usize, mb: f64, seed: u64) -> Vec<Dataset> {
    let mut x = seed | 1;
    let mean = mb * 1e6 / files as f64;
    (0..count)
        .map(|d| {
            let name = format!("ds{d}");
            let dir = root.join(&name);
            std::fs::create_dir_all(&dir).unwrap();
            let mut bytes = 0u64;
            for f in 0..files {
                let size = (mean * (0.5 + unit(&mut x))) as usize;
                let mut buf = Vec::with_capacity(size + 8);
                while buf.len() < size {
                    buf.extend_from_slice(&xorshift(&mut x).to_le_bytes());
                }
                buf.truncate(size);
                std::fs::write(dir.join(format!("part-{f:04}.bin")), &buf).unwrap();
                bytes += size as u64;
            }
            Dataset {
                name,
                dir,
                files,
                bytes,
            }
        })
        .collect()
}

/// The job list: sweeps (a user's burst of jobs on one dataset, 1 to `max_sweep` at once)
/// whose dataset follows Zipf popularity (dataset k with weight 1/(k+1)), the gaps between
/// sweeps exponential with mean `gap` seconds; `n` jobs in all.
pub fn jobs(n: usize, datasets: usize, max_sweep: usize, gap: f64, seed: u64) -> Vec<Job> {
    let mut x = (seed ^ 0x9e37_79b9_7f4a_7c15) | 1;
    let weights: Vec<f64> = (0..datasets).map(|k| 1.0 / (k + 1) as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut out = Vec::with_capacity(n);
    let mut at = 0.0;
    while out.len() < n {
        let mut pick = unit(&mut x) * total;
        let mut dataset = datasets - 1;
        for (k, w) in weights.iter().enumerate() {
            if pick < *w {
                dataset = k;
                break;
            }
            pick -= w;
        }
        let size = 1 + (xorshift(&mut x) % max_sweep.max(1) as u64) as usize;
        for _ in 0..size.min(n - out.len()) {
            out.push(Job {
                index: out.len(),
                dataset,
                at,
            });
        }
        at += -gap * (1.0 - unit(&mut x)).ln();
    }
    out
}

/// Sleeps until `at` seconds after `t0`: a job of the mix is submitted at its time.
pub fn pace(t0: std::time::Instant, at: f64) {
    let due = std::time::Duration::from_secs_f64(at);
    if let Some(rest) = due.checked_sub(t0.elapsed()) {
        std::thread::sleep(rest);
    }
}
