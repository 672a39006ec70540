//! The tables: the replay's figures side by side with ratios, and the gate's overhead.

use crate::Run;
use crate::common::median;
use std::collections::BTreeMap;

/// What the gate's side adds to its runs: the agents' stage totals, Slurm's view and the logs.
#[derive(Default)]
pub struct GateReport {
    /// Bytes the agents read from shared storage.
    pub source: u64,
    /// Bytes the agents pulled from peer nodes.
    pub peer: u64,
    /// Stages the agents logged that copied something, and all of them.
    pub copies: usize,
    pub stages: usize,
    /// Slurm jobs tagged with the pool, in all, and the most for one labpool job.
    pub slurm_jobs: usize,
    pub most_slurm_jobs: usize,
    /// Warnings and errors in the logs.
    pub complaints: Vec<String>,
}

/// The overhead runs, ms each.
#[derive(Default)]
pub struct Overhead {
    pub plain: Vec<i64>,
    pub gate: Vec<i64>,
    /// Submit to the job in Slurm's queue: `sbatch` returned (plain); the gate's `submitted to
    /// Slurm, held` (labpool).
    pub plain_queued: Vec<i64>,
    pub gate_queued: Vec<i64>,
    /// labpool: submit to its placement.
    pub gate_decision: Vec<i64>,
    pub complaints: Vec<String>,
}

/// The `p`-th percentile (nearest rank) of `v`.
fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let k = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[k - 1]
}

/// Seconds between two ms fields of every run.
fn secs(runs: &[Run], f: impl Fn(&Run) -> i64) -> Vec<f64> {
    runs.iter().map(|r| f(r) as f64 / 1e3).collect()
}

/// `median / p90` in seconds.
fn mp(v: &[f64]) -> String {
    format!("{:.2} / {:.2} s", median(v.to_vec()), pct(v, 90.0))
}

fn ratio(gate: f64, seed: f64) -> String {
    if seed == 0.0 {
        "-".into()
    } else {
        format!("{:.2}x", gate / seed)
    }
}

fn per_node(runs: &[Run]) -> String {
    let mut m: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *m.entry(r.node.as_str()).or_default() += 1;
    }
    m.iter()
        .map(|(n, c)| format!("{n} {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

/// The replay's table.
pub fn replay_table(
    n: usize,
    datasets: usize,
    total: u64,
    seed: &[Run],
    gate: &[Run],
    g: &GateReport,
) {
    let seed_bytes: u64 = seed.iter().map(|r| r.source_bytes).sum();
    let seed_copies = seed.iter().filter(|r| r.source_bytes > 0).count();
    let wait_sum = |runs: &[Run]| runs.iter().map(|r| r.wait_ms).sum::<i64>() as f64 / 1e3;
    let waits = |runs: &[Run]| secs(runs, |r| r.wait_ms);
    let (sw, gw) = (waits(seed), waits(gate));
    let d2r = |runs: &[Run]| secs(runs, |r| r.running_ms - r.decision_ms);
    let s2r = |runs: &[Run]| secs(runs, |r| r.running_ms - r.submit_ms);
    let s2d = |runs: &[Run]| secs(runs, |r| r.data_ms - r.submit_ms);
    let (sd, gd) = (d2r(seed), d2r(gate));
    println!();
    println!(
        "| {n} dataset jobs, same mix ({} in {datasets} datasets) | seed: sbatch + rsync per job | labpool on Slurm (the gate) | gate / seed |",
        mb(total)
    );
    println!("|---|---|---|---|");
    println!(
        "| shared-storage bytes read for the jobs' data | {} ({seed_copies} of {} rsyncs copied) | {} ({} of {} stages copied) | {} ({:.0}% fewer) |",
        mb(seed_bytes),
        seed.len(),
        mb(g.source),
        g.copies,
        g.stages,
        ratio(g.source as f64, seed_bytes as f64),
        100.0 * (1.0 - g.source as f64 / seed_bytes.max(1) as f64)
    );
    println!(
        "| bytes copied node to node (not shared storage) | 0 | {} | - |",
        mb(g.peer)
    );
    println!(
        "| GPU time waiting for data, all jobs | {:.1} GPU-s | {:.1} GPU-s | {} |",
        wait_sum(seed),
        wait_sum(gate),
        ratio(wait_sum(gate), wait_sum(seed))
    );
    println!(
        "| data wait per job, median / p90 | {} | {} | {} |",
        mp(&sw),
        mp(&gw),
        ratio(median(gw.clone()), median(sw.clone()))
    );
    println!(
        "| decision to running, median / p90 | {} | {} | {} |",
        mp(&sd),
        mp(&gd),
        ratio(median(gd.clone()), median(sd.clone()))
    );
    for (what, f) in [
        (
            "of which decision to queued in Slurm (seed: sbatch; gate: stage + sbatch --hold)",
            &(|r: &Run| r.queued_ms - r.decision_ms) as &dyn Fn(&Run) -> i64,
        ),
        (
            "of which queued in Slurm to running (Slurm's scheduling)",
            &|r: &Run| r.running_ms - r.queued_ms,
        ),
    ] {
        let (s, t) = (secs(seed, f), secs(gate, f));
        println!(
            "| {what}, median / p90 | {} | {} | {} |",
            mp(&s),
            mp(&t),
            ratio(median(t.clone()), median(s.clone()))
        );
    }
    for (what, f) in [
        ("submit to running", &s2r as &dyn Fn(&[Run]) -> Vec<f64>),
        ("submit to work starting (data in place)", &s2d),
    ] {
        let (s, t) = (f(seed), f(gate));
        println!(
            "| {what}, median / p90 | {} | {} | {} |",
            mp(&s),
            mp(&t),
            ratio(median(t.clone()), median(s.clone()))
        );
    }
    println!(
        "| jobs per node | {} | {} | - |",
        per_node(seed),
        per_node(gate)
    );
    let retried = gate.iter().filter(|r| r.attempts > 1).count();
    println!(
        "| Slurm jobs per job | 1 | {} for {} jobs (at most {} for one); {retried} jobs needed a 2nd attempt | - |",
        g.slurm_jobs,
        gate.len(),
        g.most_slurm_jobs
    );
    println!(
        "(labpool also reads each dataset once when it is registered, to hash it: {} more, once per version, not per job)",
        mb(total)
    );
    print_complaints("the gate's replay", &g.complaints);
}

/// The overhead table.
pub fn overhead_table(o: &Overhead, poll: &str) {
    let f = |v: &[i64]| v.iter().map(|x| *x as f64 / 1e3).collect::<Vec<f64>>();
    let (p, g) = (f(&o.plain), f(&o.gate));
    println!();
    println!(
        "| one job at a time on the idle cluster ({} each, alternating) | plain sbatch | labpool submit (the gate, poll {poll}) | gate / plain |",
        p.len()
    );
    println!("|---|---|---|---|");
    println!(
        "| submit to the job's first line, median / p90 | {} | {} | {} |",
        mp(&p),
        mp(&g),
        ratio(median(g.clone()), median(p.clone()))
    );
    let (pq, gq) = (f(&o.plain_queued), f(&o.gate_queued));
    println!(
        "| of which submit to queued in Slurm (sbatch returned / the gate's held submission), median / p90 | {} | {} | {} |",
        mp(&pq),
        mp(&gq),
        ratio(median(gq.clone()), median(pq.clone()))
    );
    println!(
        "| of which labpool's placement (submit to its decision), median | - | {:.3} s | - |",
        median(f(&o.gate_decision))
    );
    let rest = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<f64>>();
    let (pr, gr) = (rest(&p, &pq), rest(&g, &gq));
    println!(
        "| of which queued in Slurm to first line (Slurm's scheduling), median / p90 | {} | {} | {} |",
        mp(&pr),
        mp(&gr),
        ratio(median(gr.clone()), median(pr.clone()))
    );
    print_complaints("the overhead runs", &o.complaints);
}

fn print_complaints(what: &str, complaints: &[String]) {
    if complaints.is_empty() {
        println!("{what}: no warnings or errors in labpool's logs");
        return;
    }
    println!(
        "{what}: {} warnings or errors in labpool's logs, for example:",
        complaints.len()
    );
    let mut seen = std::collections::BTreeSet::new();
    for c in complaints {
        let kind: String = c
            .chars()
            .skip(c.find(" WARN ").or_else(|| c.find(" ERROR ")).unwrap_or(0))
            .filter(|ch| !ch.is_ascii_digit())
            .take(80)
            .collect();
        if seen.insert(kind) && seen.len() <= 8 {
            println!("  {c}");
        }
    }
}
