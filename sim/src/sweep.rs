//! A sweep: the policies over a family of generated lab-like traces (and any given ones), one
//! row per trace, each figure against fifo's on the same trace.
//!
//! The family varies what data placement is sensitive to: the catalogue's size and spread, the
//! popularity skew, the cache against the working set (0.25× to 2×, in turn), arrivals and job
//! lengths. Case `k` of a sweep is the same whatever the count, so a small sweep is a prefix of
//! a large one.

use crate::config::{ClusterSpec, NodeGroup};
use crate::generate::{TraceShape, generate};
use crate::report::SimReport;
use crate::{SimError, SimInput, SimPolicy, simulate};
use labpool_scheduler::policy::Policy;
use serde::Serialize;

/// The cache sizes a sweep cycles through, as fractions of the working set.
pub const CACHE_FRACTIONS: [f64; 4] = [0.25, 0.5, 1.0, 2.0];

/// One trace of a sweep, ready to run.
#[derive(Debug, Clone)]
pub struct SweepCase {
    /// A label for the table: what varies.
    pub label: String,
    /// The run's input (the cluster's cache already sized).
    pub input: SimInput,
}

/// The cluster of the lab-like traces: 8 nodes of 8 V100s, 1 GbE shared storage, 10 GbE
/// between nodes, 2 GB/s SSDs, with `ssd_bytes` of cache each.
pub fn lab_cluster(ssd_bytes: u64) -> ClusterSpec {
    ClusterSpec {
        groups: vec![NodeGroup {
            count: 8,
            gpus: 8,
            gpu_type: "v100".into(),
            slices: Vec::new(),
        }],
        ssd_bytes,
        shared_bw: 125e6,
        ssd_bw: 2e9,
        nic_bw: 1.25e9,
    }
}

/// The shape of case `k` of a sweep of traces of `jobs` jobs, and its cache as a fraction of
/// the working set. The knobs are drawn from case `k`'s own seed; the cache fraction cycles,
/// so every four cases cover 0.25× to 2×.
pub fn shape(k: usize, jobs: usize) -> (TraceShape, f64) {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(k as u64);
    let mut pick = |options: &[f64]| options[rng.random_range(0..options.len())];
    let shape = TraceShape {
        seed: 1000 + k as u64,
        jobs,
        datasets: pick(&[5.0, 10.0, 20.0]) as usize,
        skew: pick(&[0.7, 1.1, 1.5]),
        median_runtime_s: pick(&[1.0, 3.0, 8.0]) * 3600.0,
        load: pick(&[0.6, 0.8, 0.95]),
        night: pick(&[0.3, 0.6]),
        ..TraceShape::default()
    };
    (shape, CACHE_FRACTIONS[k % CACHE_FRACTIONS.len()])
}

/// `count` generated cases of `jobs` jobs each, run against `daemon`'s policy.
pub fn generated_cases(count: usize, jobs: usize, daemon: &Policy) -> Vec<SweepCase> {
    (0..count)
        .map(|k| {
            let (shape, fraction) = shape(k, jobs);
            let g = generate(&shape);
            let ssd = ((g.working_set as f64 * fraction) as u64).max(1);
            SweepCase {
                label: format!(
                    "gen{k:02}: {} ds, skew {}, cache {}x, {}h median, load {}",
                    shape.datasets,
                    shape.skew,
                    fraction,
                    shape.median_runtime_s / 3600.0,
                    shape.load
                ),
                input: SimInput {
                    jobs: g.jobs,
                    datasets: g.datasets,
                    cluster: lab_cluster(ssd),
                    horizon_s: 86_400,
                    seed: 1,
                    daemon: daemon.clone(),
                    accounts: Default::default(),
                },
            }
        })
        .collect()
}

/// One trace's figures under each policy.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// The trace.
    pub label: String,
    /// One report per policy, in the order asked.
    pub reports: Vec<SimReport>,
    /// The limit on this trace ([`crate::bound`]).
    pub bound: crate::bound::Bound,
}

/// Runs every case under every policy; `progress` is told after each case.
pub fn run(
    cases: &[SweepCase],
    policies: &[SimPolicy],
    mut progress: impl FnMut(usize),
) -> Result<Vec<SweepRow>, SimError> {
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let reports = policies
                .iter()
                .map(|p| simulate(&c.input, *p))
                .collect::<Result<Vec<_>, _>>()?;
            progress(i + 1);
            Ok(SweepRow {
                bound: crate::bound::bound(&c.input),
                label: c.label.clone(),
                reports,
            })
        })
        .collect()
}

/// `x` against `base`, as a signed percentage; `=` when both are zero.
fn change(x: f64, base: f64) -> String {
    if base == 0.0 {
        return if x == 0.0 { "=".into() } else { "+inf".into() };
    }
    format!("{:+.0}%", (x / base - 1.0) * 100.0)
}

/// The sweep table: per trace, each policy's mean JCT, shared-storage bytes, data-wait, GPU
/// compute utilisation and fairness against the first policy's (fifo), then the worst of each
/// over the sweep (the largest rise of the first three, the largest fall of the last two).
pub fn table(rows: &[SweepRow]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let names: Vec<&str> = first.reports.iter().map(|r| r.policy.as_str()).collect();
    let mut out = String::from("| trace |");
    for n in names.iter().skip(1) {
        out.push_str(&format!(
            " {n}: JCT | {n}: bytes | {n}: data-wait | {n}: compute util | {n}: fairness |"
        ));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|---|---|---|---|".repeat(names.len().saturating_sub(1)));
    out.push('\n');
    // (figure, whether higher is better) per column.
    let figures = |r: &SimReport| {
        [
            (r.mean_jct_s, false),
            (r.shared_bytes, false),
            (r.data_wait_gpu_s, false),
            (r.gpu_compute_util, true),
            (r.fairness_jain, true),
        ]
    };
    let mut worst = vec![[0.0_f64; 5]; names.len()];
    let mut seen = vec![[false; 5]; names.len()];
    for row in rows {
        let base = figures(&row.reports[0]);
        out.push_str(&format!("| {} |", row.label));
        for (i, r) in row.reports.iter().enumerate().skip(1) {
            for (k, ((x, higher), (b, _))) in figures(r).iter().zip(base).enumerate() {
                out.push_str(&format!(" {} |", change(*x, b)));
                if b > 0.0 {
                    let d = x / b - 1.0;
                    let worse = if *higher {
                        d < worst[i][k]
                    } else {
                        d > worst[i][k]
                    };
                    if !seen[i][k] || worse {
                        worst[i][k] = d;
                        seen[i][k] = true;
                    }
                }
            }
        }
        out.push('\n');
    }
    out.push_str("| **worst against fifo** |");
    for w in worst.iter().skip(1) {
        for v in w {
            out.push_str(&format!(" {:+.0}% |", v * 100.0));
        }
    }
    out.push('\n');
    out
}

/// Per trace, each policy's way from fifo (the first policy) to the limit, in shared-storage
/// bytes and in GPU time waiting for data (0%: fifo's figure, 100%: the limit), then the
/// median and the least over the sweep.
pub fn bound_table(rows: &[SweepRow]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let names: Vec<&str> = first.reports.iter().map(|r| r.policy.as_str()).collect();
    let mut out = String::from("| trace | limit: bytes |");
    for n in names.iter().skip(1) {
        out.push_str(&format!(" {n}: way in bytes | {n}: way in data-wait |"));
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|---|".repeat(names.len().saturating_sub(1)));
    out.push('\n');
    let mut ways: Vec<[Vec<f64>; 2]> = vec![[Vec::new(), Vec::new()]; names.len()];
    for row in rows {
        let base = &row.reports[0];
        out.push_str(&format!(
            "| {} | {} |",
            row.label,
            labpool_units::format_size(row.bound.shared_bytes as u64)
        ));
        for (i, r) in row.reports.iter().enumerate().skip(1) {
            let pair = [
                crate::bound::way(r.shared_bytes, base.shared_bytes, row.bound.shared_bytes),
                crate::bound::way(
                    r.data_wait_gpu_s,
                    base.data_wait_gpu_s,
                    row.bound.data_wait_gpu_s,
                ),
            ];
            for (k, w) in pair.iter().enumerate() {
                out.push_str(&format!(" {} |", crate::bound::percent(*w)));
                ways[i][k].extend(w);
            }
        }
        out.push('\n');
    }
    for (what, pick) in [("median", 0.5), ("least", 0.0)] {
        out.push_str(&format!("| **{what} over the sweep** | |"));
        for w in ways.iter().skip(1) {
            for v in w {
                let x = (!v.is_empty()).then(|| crate::report::quantile(v, pick));
                out.push_str(&format!(" {} |", crate::bound::percent(x)));
            }
        }
        out.push('\n');
    }
    out
}
