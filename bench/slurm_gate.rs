//! labpool over Slurm against the seed's method, on the repo's test Slurm cluster
//! (`scripts/slurm-cluster`: Slurm 22.05, gn1..gn4 with 8 fake A100s each, all on this host).
//!
//! ```text
//! cargo bench --bench slurm_gate          # as root: it starts the test cluster if need be
//! BENCH_JOBS=200 BENCH_DATASETS=5 BENCH_FILES=200 BENCH_DATASET_MB=24 BENCH_WORK=1 \
//!   BENCH_SWEEP=12 BENCH_GAP=2.5 BENCH_SEED=1 BENCH_ORDER=seed|gate BENCH_GATE_JOBS=20 \
//!   BENCH_POLL=1s cargo bench --bench slurm_gate
//! ```
//!
//! The mix: BENCH_DATASETS datasets (`ds0..`) of BENCH_FILES files of random bytes,
//! BENCH_DATASET_MB MB each, on shared storage (the controller's shared root). BENCH_JOBS
//! one-GPU jobs arrive in sweeps (1 to BENCH_SWEEP jobs at once on one dataset, the dataset of
//! each sweep drawn with Zipf popularity, 1/(k+1)), exponential gaps of mean BENCH_GAP s
//! between sweeps. Each job works (sleeps) BENCH_WORK s once its data is there. Both sides get
//! the same list: same seed, order, arrival times and dataset files. BENCH_ORDER says which
//! side runs first (`seed`, the default, or `gate`); the cluster is idle before each.
//!
//! - The seed's method: plain `sbatch --exclude=gn4 --gres=gpu:1 --mem=1G`, no labpool; the
//!   job first runs `rsync -a --stats` of its dataset into the node's local cache directory
//!   (one per node and dataset, kept across jobs), then works.
//! - The gate: a controller with `[executor] kind = "slurm"` (poll BENCH_POLL, default the
//!   shipped 1 s) and one agent per node gn1..gn3; datasets registered with `labpool dataset
//!   add`, jobs submitted with `labpool submit --parsable` with `#LABPOOL --dataset` and
//!   `#SBATCH --gres=gpu:1`.
//!
//! Then the gate's overhead: on the idle cluster, BENCH_GATE_JOBS single jobs (a script that
//! writes the time and exits), one at a time, alternating plain `sbatch` and `labpool submit`
//! (a fresh controller, no datasets), each timed from just before the submit command to the
//! time its first line wrote.
//!
//! How each figure is measured is in `docs/benchmarks.md` ("labpool over Slurm"); the sides
//! are in `slurm_gate/seed.rs` and `slurm_gate/gated.rs`, the pool in `slurm_gate/pool.rs`,
//! the mix in `slurm_gate/mix.rs` and the tables in `slurm_gate/report.rs`.

#[path = "common.rs"]
mod common;
#[path = "cluster/daemon.rs"]
mod daemon;
#[path = "slurm_gate/gated.rs"]
mod gated;
#[path = "slurm_gate/mix.rs"]
mod mix;
#[path = "slurm_gate/pool.rs"]
mod pool;
#[path = "slurm_gate/report.rs"]
mod report;
#[path = "slurm_gate/seed.rs"]
mod seed;
// Its `sbatch` and `wait_gone` serve other benchmarks.
#[allow(dead_code)]
#[path = "slurm_peer.rs"]
mod slurm_peer;

use common::{bench_base, env_num, require_tools, run, scratch_dir};
use serde_json::Value;
use slurm_peer::Slurm;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// One job as one side ran it; times in ms since the epoch.
#[derive(Debug, Clone)]
pub struct Run {
    /// Just before the submit command.
    pub submit_ms: i64,
    /// The placement: labpool's `staging` (or `start`) event; for plain Slurm, the submit.
    pub decision_ms: i64,
    /// The job in Slurm's queue, eligible to start: `sbatch` returned (seed); the gate logged
    /// `submitted to Slurm, held` (it releases the batch's jobs in one call right after).
    pub queued_ms: i64,
    /// The job script's first line, in Slurm.
    pub running_ms: i64,
    /// Its data in place on the node: after rsync (seed); the first line (gate).
    pub data_ms: i64,
    /// Time a GPU was held for the job while its data was copied: the rsync (seed); the
    /// stage, from the placement to the `staged` event (gate: labpool holds the GPU in its
    /// books, Slurm does not yet).
    pub wait_ms: i64,
    /// The node it ran on.
    pub node: String,
    /// Bytes its rsync read from shared storage (seed only).
    pub source_bytes: u64,
    /// labpool's attempt number (1: it ran once).
    pub attempts: u64,
}

/// Now, in ms since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Waits until `dir` holds `PREFIX<index>` for `n` jobs; each one's line, by index.
pub fn wait_files(
    dir: &Path,
    prefix: &str,
    n: usize,
    timeout: Duration,
) -> BTreeMap<usize, String> {
    let t0 = Instant::now();
    loop {
        let mut found = BTreeMap::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(i) = name.strip_prefix(prefix).and_then(|i| i.parse().ok()) {
                found.insert(i, std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        if found.len() >= n {
            return found;
        }
        assert!(
            t0.elapsed() < timeout,
            "{} of {n} jobs wrote their result in {dir:?} after {timeout:?}",
            found.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Slurm's queue (`squeue --json`: every job, finished ones until MinJobAge).
fn queue(slurm: &Slurm) -> Vec<Value> {
    let v: Value = serde_json::from_str(&run(slurm.cmd("squeue").arg("--json"))).unwrap();
    v["jobs"].as_array().cloned().unwrap_or_default()
}

fn active(j: &Value) -> bool {
    matches!(
        j["job_state"].as_str(),
        Some("PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING" | "SUSPENDED")
    )
}

/// This benchmark's jobs: the seed's (by name) and those of labpool pools in `pools`.
fn ours(j: &Value, pools: &[String]) -> bool {
    j["name"] == seed::NAME
        || j["comment"]
            .as_str()
            .is_some_and(|c| pools.iter().any(|p| c.contains(&format!(";pool={p}"))))
}

/// Waits until Slurm runs nothing at all (ours or anyone's), up to `timeout`; says so if not.
fn wait_idle(slurm: &Slurm, timeout: Duration) {
    let t0 = Instant::now();
    loop {
        let busy = queue(slurm).iter().filter(|j| active(j)).count();
        if busy == 0 {
            return;
        }
        if t0.elapsed() > timeout {
            println!("  note: {busy} Slurm jobs still active after {timeout:?}; going on");
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Cancels every job of ours still active in Slurm when dropped (also after a panic).
struct Cleanup<'a> {
    slurm: &'a Slurm,
    pools: Vec<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let ids: Vec<String> = queue(self.slurm)
            .iter()
            .filter(|j| active(j) && ours(j, &self.pools))
            .map(|j| j["job_id"].to_string())
            .collect();
        if !ids.is_empty() {
            println!(
                "cancelling {} Slurm jobs left: {}",
                ids.len(),
                ids.join(" ")
            );
            let _ = self.slurm.cmd("scancel").args(&ids).output();
        }
    }
}

/// SLURM_CONF of the peer's commands.
fn slurm_conf(slurm: &Slurm) -> String {
    let c = slurm.cmd("true");
    c.get_envs()
        .find(|(k, _)| *k == "SLURM_CONF")
        .and_then(|(_, v)| v)
        .map(|v| v.to_string_lossy().to_string())
        .expect("SLURM_CONF")
}

/// The Slurm jobs each labpool job of `pool` had, from the queue.
fn slurm_jobs_per_job(slurm: &Slurm, pool: &str) -> BTreeMap<u64, usize> {
    let mark = format!(";pool={pool}");
    let mut out = BTreeMap::new();
    for j in queue(slurm) {
        let Some(c) = j["comment"].as_str().filter(|c| c.contains(&mark)) else {
            continue;
        };
        if let Some(id) = c
            .strip_prefix("labpool:")
            .and_then(|r| r.split(':').next())
            .and_then(|i| i.parse().ok())
        {
            *out.entry(id).or_insert(0) += 1;
        }
    }
    out
}

fn main() {
    let Some(slurm) = slurm_peer::peer_or_skip() else {
        println!("slurm_gate needs the test Slurm cluster (root): nothing measured");
        return;
    };
    require_tools("slurm_gate", &[("rsync", "rsync")]);
    let n: usize = env_num("BENCH_JOBS", 200);
    let datasets: usize = env_num("BENCH_DATASETS", 5);
    let files: usize = env_num("BENCH_FILES", 200);
    let mb: f64 = env_num("BENCH_DATASET_MB", 24.0);
    let work: f64 = env_num("BENCH_WORK", 1.0);
    let sweep: usize = env_num("BENCH_SWEEP", 12);
    let gap: f64 = env_num("BENCH_GAP", 2.5);
    let seed_no: u64 = env_num("BENCH_SEED", 1);
    let gate_jobs: usize = env_num("BENCH_GATE_JOBS", 20);
    let poll = std::env::var("BENCH_POLL").unwrap_or_else(|_| "1s".into());
    let gate_first = std::env::var("BENCH_ORDER").as_deref() == Ok("gate");
    let conf = slurm_conf(&slurm);
    let mut cleanup = Cleanup {
        slurm: &slurm,
        pools: Vec::new(),
    };
    println!(
        "{} (test cluster: gn1..gn4, 8 fake A100 each; the gate has agents on gn1..gn3, the seed's jobs --exclude=gn4)",
        slurm.version
    );
    wait_idle(&slurm, Duration::from_secs(60));

    let base = bench_base();
    let scratch = scratch_dir(&base, "slurm-gate");
    let dir = scratch.path();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shared = dir.join("shared");
    let data = mix::make_datasets(&shared.join("datasets"), datasets, files, mb, seed_no);
    let jobs = mix::jobs(n, datasets, sweep, gap, seed_no);
    let total: u64 = data.iter().map(|d| d.bytes).sum();
    let per_ds: Vec<usize> = (0..datasets)
        .map(|k| jobs.iter().filter(|j| j.dataset == k).count())
        .collect();
    println!(
        "mix: {n} one-GPU jobs over {:.0} s of arrivals, in sweeps of 1..{sweep}; {datasets} datasets of {files} files, {:.1} MB in all; jobs per dataset {per_ds:?}; work {work} s; {} first",
        jobs.last().map_or(0.0, |j| j.at),
        total as f64 / 1e6,
        if gate_first { "the gate" } else { "the seed" }
    );

    let (mut seed_runs, mut gate_runs) = (Vec::new(), Vec::new());
    let mut gate_report = report::GateReport::default();
    for side in if gate_first {
        [true, false]
    } else {
        [false, true]
    } {
        wait_idle(&slurm, Duration::from_secs(60));
        let t0 = Instant::now();
        if side {
            let gate = pool::Gate::start(&dir.join("lab"), &shared, &conf, &poll);
            cleanup.pools.push(gate.pool.clone());
            gate_runs = gated::replay(&gate, &data, &jobs, work);
            let (source, peer, copies, stages) = gate.staged();
            let per_job = slurm_jobs_per_job(&slurm, &gate.pool);
            gate_report = report::GateReport {
                source,
                peer,
                copies,
                stages,
                slurm_jobs: per_job.values().sum(),
                most_slurm_jobs: per_job.values().copied().max().unwrap_or(0),
                complaints: gate.complaints(),
            };
            println!(
                "  the gate: {:.1} s, {stages} stages",
                t0.elapsed().as_secs_f64()
            );
        } else {
            seed_runs = seed::replay(&slurm, dir, &data, &jobs, work);
            println!("  the seed: {:.1} s", t0.elapsed().as_secs_f64());
        }
    }
    report::replay_table(n, datasets, total, &seed_runs, &gate_runs, &gate_report);

    // The gate's overhead: one job at a time on the idle cluster.
    wait_idle(&slurm, Duration::from_secs(60));
    let gate = pool::Gate::start(&dir.join("lab-overhead"), &shared, &conf, &poll);
    cleanup.pools.push(gate.pool.clone());
    let marks = dir.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let mut o = report::Overhead::default();
    // A random pause before each submission: Slurm starts batch jobs in cycles (its
    // batch_sched_delay, 3 s by default), and a submission right after the previous job's end
    // would otherwise always fall at the same point of the cycle.
    let mut x = seed_no.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    for i in 0..gate_jobs {
        let order = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for labpool in order {
            let pause = common::xorshift(&mut x) % 3000;
            std::thread::sleep(Duration::from_millis(pause));
            let mark = marks.join(format!("{}-{i}", if labpool { "gate" } else { "plain" }));
            let at = now_ms();
            if labpool {
                let id = gated::one(&gate, &mark);
                let t = wait_mark(&mark);
                let rec = gated::recorded(&gate, id);
                o.gate.push(t - at);
                o.gate_decision.push(rec.decision_ms - at);
                o.gate_queued.push(gate.held_times()[&id] - at);
                gate.wait("the job to end", Duration::from_secs(30), |g| {
                    (g.active() == 0).then_some(())
                });
            } else {
                seed::one(&slurm, dir, &mark);
                o.plain_queued.push(now_ms() - at);
                o.plain.push(wait_mark(&mark) - at);
            }
            wait_idle(&slurm, Duration::from_secs(30));
        }
    }
    o.complaints = gate.complaints();
    drop(gate);
    report::overhead_table(&o, &poll);
    drop(cleanup);
    if std::env::var_os("BENCH_KEEP").is_some() {
        println!("kept: {}", scratch.keep().display());
    }
}

/// Waits for a job's mark file; the time it holds, in ms since the epoch.
fn wait_mark(mark: &Path) -> i64 {
    let t0 = Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(mark)
            && let Ok(s) = t.trim().parse::<f64>()
        {
            return (s * 1e3) as i64;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no start mark {mark:?} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
