//! Lab-like synthetic traces: a catalogue of datasets of very different sizes read with Zipf
//! popularity, day-and-night arrivals, lognormal run times and mostly small jobs, on a cache
//! sized against the working set. The same shape and seed give the same trace, byte for byte.
//!
//! Decisions recorded here:
//! - Dataset sizes are spaced evenly on a log scale between the bounds (which size is which
//!   dataset's is shuffled), so a catalogue holds a few very large datasets among many small
//!   ones, as a lab's does (MNIST beside ImageNet-21k).
//! - The working set is the sum of the datasets the trace reads; the cache is given as a
//!   fraction of it, so that "cache pressure" means the same thing on every trace.
//! - Arrivals are paced so that the pool's offered load matches `load` (GPU-seconds asked over
//!   GPU-seconds available in the span); an hour of the night (0:00 to 8:00) gets `night`
//!   times the day's rate.
//! - Run times are V100 seconds; P100 and K80 take 1.7× and 4× as long, Gavel's mean ratios.

use crate::trace::TraceJob;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal, Zipf};
use std::collections::BTreeMap;

/// The knobs of a generated trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceShape {
    /// Seed: the same shape and seed give the same trace.
    pub seed: u64,
    /// Jobs in the trace.
    pub jobs: usize,
    /// Datasets in the catalogue.
    pub datasets: usize,
    /// The smallest dataset, bytes.
    pub min_bytes: u64,
    /// The largest dataset, bytes.
    pub max_bytes: u64,
    /// Zipf exponent of dataset popularity (0: uniform; 1.5: one dataset dominates).
    pub skew: f64,
    /// Share of jobs that read no dataset.
    pub no_data: f64,
    /// Median run time on a V100, seconds.
    pub median_runtime_s: f64,
    /// Spread of run times (the lognormal's sigma).
    pub runtime_sigma: f64,
    /// Offered load: GPU-seconds asked over GPU-seconds available while jobs arrive.
    pub load: f64,
    /// The night's arrival rate over the day's.
    pub night: f64,
    /// GPUs in the pool, for pacing arrivals.
    pub pool_gpus: u32,
    /// Lab members.
    pub users: usize,
}

impl Default for TraceShape {
    /// The lab-like trace of the data-placement issue: 2,000 jobs on 8 × 8 V100s, ten datasets
    /// from 45 MB to 450 GB.
    fn default() -> Self {
        TraceShape {
            seed: 1,
            jobs: 2000,
            datasets: 10,
            min_bytes: 45_000_000,
            max_bytes: 450_000_000_000,
            skew: 1.1,
            no_data: 0.1,
            median_runtime_s: 3.0 * 3600.0,
            runtime_sigma: 1.2,
            load: 0.8,
            night: 0.3,
            pool_gpus: 64,
            users: 12,
        }
    }
}

/// A generated trace with its catalogue.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The jobs.
    pub jobs: Vec<TraceJob>,
    /// Dataset sizes, bytes.
    pub datasets: BTreeMap<String, u64>,
    /// Bytes of the datasets the trace reads.
    pub working_set: u64,
}

const GPU_SIZES: [(u32, f64); 4] = [(1, 0.6), (2, 0.2), (4, 0.12), (8, 0.08)];

/// Generates a trace of `shape`.
pub fn generate(shape: &TraceShape) -> Generated {
    let mut rng = ChaCha8Rng::seed_from_u64(shape.seed);
    let n = shape.datasets.max(1);
    let (lo, hi) = (
        (shape.min_bytes.max(1) as f64).ln(),
        (shape.max_bytes.max(shape.min_bytes).max(1) as f64).ln(),
    );
    // Popularity rank is independent of size: shuffle which size gets which rank.
    let mut sizes: Vec<u64> = (0..n)
        .map(|i| {
            let t = if n == 1 {
                1.0
            } else {
                i as f64 / (n - 1) as f64
            };
            (lo + t * (hi - lo)).exp().round() as u64
        })
        .collect();
    for i in (1..sizes.len()).rev() {
        let j = rng.random_range(0..=i);
        sizes.swap(i, j);
    }
    let datasets: BTreeMap<String, u64> = sizes
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("ds{i:02}"), *b))
        .collect();
    let zipf = Zipf::new(n as f64, shape.skew.max(0.0)).expect("n ≥ 1, s ≥ 0");
    let runtime =
        LogNormal::new(shape.median_runtime_s.ln(), shape.runtime_sigma).expect("sigma ≥ 0");

    let mut drafts = Vec::with_capacity(shape.jobs);
    let mut gpu_seconds = 0.0;
    for i in 0..shape.jobs {
        let roll: f64 = rng.random();
        let mut acc = 0.0;
        let gpus = GPU_SIZES
            .iter()
            .find(|(_, p)| {
                acc += p;
                roll < acc
            })
            .map_or(1, |(g, _)| *g);
        let dataset = if rng.random::<f64>() < shape.no_data {
            "none".to_string()
        } else {
            let rank = zipf.sample(&mut rng) as usize;
            format!("ds{:02}", rank.clamp(1, n) - 1)
        };
        let secs = runtime
            .sample(&mut rng)
            .clamp(60.0, 14.0 * 86_400.0)
            .round();
        gpu_seconds += secs * gpus as f64;
        let user = format!("u{:02}", rng.random_range(0..shape.users.max(1)));
        drafts.push((i as u64 + 1, user, gpus, dataset, secs));
    }
    // The span that gives the offered load, and arrivals over it by thinning: a night hour
    // keeps an arrival with probability `night`.
    let span = gpu_seconds / (shape.pool_gpus.max(1) as f64 * shape.load.max(0.01));
    let mut submits: Vec<f64> = Vec::with_capacity(shape.jobs);
    while submits.len() < shape.jobs {
        let t: f64 = rng.random::<f64>() * span;
        let hour = (t / 3600.0) as u64 % 24;
        if hour >= 8 || rng.random::<f64>() < shape.night.max(0.01) {
            submits.push(t.round());
        }
    }
    submits.sort_by(f64::total_cmp);
    let jobs: Vec<TraceJob> = drafts
        .into_iter()
        .zip(submits)
        .map(|((job_id, user, gpus, dataset, secs), submit_s)| TraceJob {
            job_id,
            submit_s,
            user,
            gpus,
            job_type: format!("synthetic ({dataset})"),
            dataset,
            dur_v100_s: Some(secs),
            dur_p100_s: Some((secs * 1.7).round()),
            dur_k80_s: Some((secs * 4.0).round()),
            slice: None,
        })
        .collect();
    let working_set = datasets
        .iter()
        .filter(|(d, _)| jobs.iter().any(|j| &j.dataset == *d))
        .map(|(_, b)| *b)
        .sum();
    Generated {
        jobs,
        datasets,
        working_set,
    }
}

/// Writes a trace in the columns [`crate::trace::parse_trace`] reads.
pub fn trace_csv(jobs: &[TraceJob]) -> String {
    let mut out = String::from(
        "job_id,submit_s,user,gpus,dataset,job_type,dur_v100_s,dur_p100_s,dur_k80_s\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for j in jobs {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            j.job_id,
            j.submit_s,
            j.user,
            j.gpus,
            j.dataset,
            j.job_type,
            opt(j.dur_v100_s),
            opt(j.dur_p100_s),
            opt(j.dur_k80_s)
        ));
    }
    out
}

/// Writes a catalogue in the columns [`crate::trace::parse_datasets`] reads.
pub fn datasets_csv(datasets: &BTreeMap<String, u64>) -> String {
    let mut out = String::from("dataset,bytes\n");
    for (d, b) in datasets {
        out.push_str(&format!("{d},{b}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{parse_datasets, parse_trace};

    #[test]
    fn the_same_seed_gives_the_same_trace_and_it_reads_back() {
        let shape = TraceShape {
            jobs: 300,
            ..TraceShape::default()
        };
        let a = generate(&shape);
        let b = generate(&shape);
        assert_eq!(trace_csv(&a.jobs), trace_csv(&b.jobs));
        assert_eq!(parse_trace(trace_csv(&a.jobs).as_bytes()).unwrap(), a.jobs);
        assert_eq!(
            parse_datasets(datasets_csv(&a.datasets).as_bytes()).unwrap(),
            a.datasets
        );
        let other = generate(&TraceShape { seed: 2, ..shape });
        assert_ne!(trace_csv(&a.jobs), trace_csv(&other.jobs));
    }

    #[test]
    fn sizes_span_the_bounds_and_popularity_is_skewed() {
        let g = generate(&TraceShape::default());
        let (min, max) = (
            *g.datasets.values().min().unwrap(),
            *g.datasets.values().max().unwrap(),
        );
        assert_eq!((min, max), (45_000_000, 450_000_000_000));
        let mut reads: BTreeMap<&str, usize> = BTreeMap::new();
        for j in &g.jobs {
            *reads.entry(j.dataset.as_str()).or_default() += 1;
        }
        let mut counts: Vec<usize> = reads
            .iter()
            .filter(|(d, _)| **d != "none")
            .map(|(_, c)| *c)
            .collect();
        counts.sort_unstable();
        // Zipf 1.1 over ten: the most read dataset is read far more than the least.
        assert!(counts[counts.len() - 1] > 5 * counts[0], "{counts:?}");
        // Nights are quieter than days.
        let night = g
            .jobs
            .iter()
            .filter(|j| (j.submit_s / 3600.0) as u64 % 24 < 8)
            .count();
        assert!(night * 3 < g.jobs.len(), "{night} of {}", g.jobs.len());
    }
}
