//! `srun` step launch latency inside an allocation: labpool's `srun` against Slurm 22.05's, on
//! the same machine, in one run, with ratios.
//!
//! ```text
//! cargo bench --bench srun                  # as root: the Slurm side uses scripts/slurm-cluster
//! BENCH_REPS=100 cargo bench --bench srun   # steps timed per kind (default 30)
//! BENCH_NO_SLURM=1 cargo bench --bench srun # labpool alone
//! ```
//!
//! One batch script (`#SBATCH -N 1 -n 4 -c 1 --mem=1G`) is submitted to each system: to a
//! labpool pool (`labpool init --virtual-gpus` + `labpool serve`, its agent in-process, the
//! node's `cpus` raised to 8 so that 4 tasks fit on this machine) with `labpool submit`, and to
//! the four-node Slurm 22.05 test cluster of `scripts/slurm-cluster` with `sbatch`. Inside the
//! job the script runs one untimed `srun -n 1 true`, then `BENCH_REPS` times each of: `true`
//! alone (the loop's own cost: two `date` calls and a fork), `srun -n 1 true` and
//! `srun -n 4 true`, each timed with `date +%s%N` around it. Inside a labpool job `srun` is the
//! labpool binary, linked first on the job's `PATH`; it forks the tasks itself. Slurm's asks
//! slurmctld for a step, and slurmd starts a slurmstepd that starts the tasks. The bench waits
//! for the script's last line (a marker file), reads the nanoseconds and prints medians and p90s.

#[path = "common.rs"]
mod common;
#[path = "slurm_peer.rs"]
mod slurm_peer;
use common::{bench_base, env_num, median, run, scratch_dir, start_labpool};
use slurm_peer::Slurm;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The kinds of step timed, in the script's order: (file name, command, table label).
const KINDS: [(&str, &str, &str); 3] = [
    ("base", "true", "`true` without srun (the loop's own cost)"),
    ("srun1", "srun -n 1 true", "`srun -n 1 true` (1 task)"),
    ("srun4", "srun -n 4 true", "`srun -n 4 true` (4 tasks)"),
];

/// Writes `dir/job.sh`, the batch script both systems run; it writes its timings (ns, one a
/// line) under `dir`. Returns its path.
fn write_script(dir: &Path, reps: usize) -> PathBuf {
    let d = dir.display();
    let mut s = String::from(
        "#!/bin/bash\n#SBATCH -J srun-bench -N 1 -n 4 -c 1 --mem=1G\nsrun -n 1 true\n",
    );
    for (file, cmd, _) in KINDS {
        s.push_str(&format!(
            "for i in $(seq 1 {reps}); do s=$(date +%s%N); {cmd}; e=$(date +%s%N); \
             echo $((e-s)); done > {d}/{file}.ns\n"
        ));
    }
    s.push_str(&format!("echo ok > {d}/done\n"));
    std::fs::write(dir.join("job.sh"), s).unwrap();
    dir.join("job.sh")
}

/// Waits for the script's marker, then reads each kind's step times in milliseconds.
fn collect(dir: &Path, reps: usize, timeout: Duration, who: &str) -> Vec<Vec<f64>> {
    let t0 = Instant::now();
    while !dir.join("done").exists() {
        assert!(
            t0.elapsed() < timeout,
            "{who}: the job did not finish in {timeout:?} (see {})",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    KINDS
        .iter()
        .map(|(file, _, _)| {
            let text = std::fs::read_to_string(dir.join(format!("{file}.ns"))).unwrap();
            let ms: Vec<f64> = text
                .lines()
                .filter_map(|l| l.trim().parse::<f64>().ok())
                .map(|ns| ns / 1e6)
                .collect();
            assert_eq!(ms.len(), reps, "{who}: {file}.ns has {} lines", ms.len());
            ms
        })
        .collect()
}

/// The 90th percentile (nearest rank).
fn p90(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() * 9).div_ceil(10)).max(1) - 1]
}

/// A labpool pool on this machine: `serve` with 2 virtual GPUs, stopped with TERM when dropped.
struct Labpool {
    bin: PathBuf,
    dir: tempfile::TempDir,
    config: PathBuf,
    server: Child,
}

impl Labpool {
    fn start() -> Labpool {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_labpool"));
        // The node's cores raised to 8: the job asks for 4, and this machine may have 2.
        let (dir, config, server) = start_labpool(&bin, "lp-bench-srun-", |text| {
            let lines: Vec<String> = text
                .lines()
                .map(|l| match l.starts_with("cpus = ") {
                    true => "cpus = 8".to_string(),
                    false => l.to_string(),
                })
                .collect();
            lines.join("\n") + "\n"
        });
        let lp = Labpool {
            bin,
            dir,
            config,
            server,
        };
        let t0 = Instant::now();
        while !lp.cmd().arg("queue").output().unwrap().status.success() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "labpool serve did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        lp
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("LABPOOL_CONFIG", &self.config)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        c
    }

    /// Runs the script as one job; each kind's step times in ms.
    fn steps(&self, out: &Path, reps: usize, timeout: Duration) -> Vec<Vec<f64>> {
        let file = write_script(out, reps);
        run(self
            .cmd()
            .args(["submit", "--parsable", "-o"])
            .arg(out.join("job.out"))
            .arg(file));
        collect(out, reps, timeout, "labpool")
    }
}

impl Drop for Labpool {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.server.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.server.wait();
    }
}

/// Runs the script as one job on the Slurm peer; each kind's step times in ms.
fn slurm_steps(slurm: &Slurm, out: &Path, reps: usize, timeout: Duration) -> Vec<Vec<f64>> {
    let file = write_script(out, reps);
    let id = slurm.sbatch(out, &file);
    let times = collect(out, reps, timeout, "Slurm");
    // Wait for the job to leave the queue, so that a next run finds the cluster idle.
    slurm.wait_gone(&id);
    times
}

fn main() {
    // `cargo bench` passes --bench; nothing else is taken.
    let reps: usize = env_num("BENCH_REPS", 30).max(1);
    let timeout = Duration::from_secs(60 + reps as u64);
    println!("srun benchmark: {reps} steps of each kind, one job per system");
    let slurm = slurm_peer::peer_or_skip();
    let base = bench_base();

    let lp = Labpool::start();
    let lp_dir = scratch_dir(&base, "srun-labpool");
    let lp_ms = lp.steps(lp_dir.path(), reps, timeout);
    drop(lp);
    let sl_dir = scratch_dir(&base, "srun-slurm");
    let sl_ms = slurm
        .as_ref()
        .map(|s| slurm_steps(s, sl_dir.path(), reps, timeout));

    println!();
    println!(
        "labpool {} vs {}",
        env!("CARGO_PKG_VERSION"),
        slurm.as_ref().map_or("no Slurm", |s| s.version.as_str())
    );
    println!(
        "| step inside a job (-N 1 -n 4), {reps} each | labpool median | labpool p90 | Slurm median | Slurm p90 | Slurm / labpool (median) |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, (_, _, label)) in KINDS.iter().enumerate() {
        let (lm, lp90) = (median(lp_ms[i].clone()), p90(lp_ms[i].clone()));
        match &sl_ms {
            Some(sl) => {
                let (sm, sp90) = (median(sl[i].clone()), p90(sl[i].clone()));
                println!(
                    "| {label} | {lm:.2} ms | {lp90:.2} ms | {sm:.2} ms | {sp90:.2} ms | {:.1}x |",
                    sm / lm
                );
            }
            None => println!("| {label} | {lm:.2} ms | {lp90:.2} ms | - | - | - |"),
        }
    }
    // The spread of each srun kind, min to max.
    let spread = |who: &str, v: &[Vec<f64>]| {
        let r = |x: &[f64]| {
            let lo = x.iter().cloned().fold(f64::MAX, f64::min);
            format!("{lo:.2} to {:.2} ms", x.iter().cloned().fold(0.0, f64::max))
        };
        println!("{who} srun -n 1: {}; srun -n 4: {}", r(&v[1]), r(&v[2]));
    };
    spread("labpool", &lp_ms);
    if let Some(sl) = &sl_ms {
        spread("Slurm", sl);
    }
}
