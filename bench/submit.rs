//! Submit throughput and submit-to-start latency: labpool against Slurm on the same machine,
//! in one run, with ratios.
//!
//! ```text
//! cargo bench --bench submit            # as root: starts bench/slurm/start.sh for the peer
//! BENCH_JOBS=1000 BENCH_REPS=3 BENCH_LATENCY_REPS=20 BENCH_CONCURRENCY=16 cargo bench --bench submit
//! BENCH_ONLY=depth BENCH_DEPTH_REPS=3 cargo bench --bench submit   # the queue-depth sweep alone
//! BENCH_DEPTH_REPS=0 cargo bench --bench submit                    # without the sweep
//! BENCH_NO_SLURM=1 cargo bench --bench submit                      # labpool alone
//! ```
//!
//! Both pools have one node with 2 GPUs (virtual for labpool, fake device files for Slurm). For
//! throughput, a first job holds both GPUs, so every submitted job waits: we time submission, not
//! execution. "CLI" is one client process per job, one after another (`labpool submit` against
//! `sbatch`); "`sbatch`" is the same with labpool's `sbatch` (the binary called by that name, as
//! `install-slurm-commands` links it) and sbatch's own words, as a lab's shell loop runs it. "Concurrent" is 16 submitters at once: labpool through its HTTP API on the Unix
//! socket, Slurm through 16 parallel `sbatch` processes (sbatch is Slurm's submit API client;
//! slurmrestd is not part of the recipe). Latency is from just before the submit call to the
//! first line of the job, which records the wall clock, on an idle pool.

use labpool::api::{CancelOutcome, CancelRequest, SubmitRequest, Submitted};
use labpool::client::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[path = "common.rs"]
mod common;
#[path = "submit/depth.rs"]
mod depth;
use common::{env_num, median};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Waits for a file the job writes, returns its first line as nanoseconds.
fn wait_stamp(path: &Path, timeout: Duration) -> Option<u128> {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Ok(ns) = s.trim().parse()
        {
            return Some(ns);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

struct Labpool {
    bin: PathBuf,
    dir: tempfile::TempDir,
    config: PathBuf,
    server: Child,
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Labpool {
    fn start() -> Labpool {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_labpool"));
        let (dir, config, server) = common::start_labpool(&bin, "lp-bench-", |text| text);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let client = Client::new(&dir.path().join("labpool.sock"));
        let t0 = Instant::now();
        while rt
            .block_on(client.get::<labpool::api::Ping>("/v1/ping"))
            .is_err()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "labpool serve did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Labpool {
            bin,
            dir,
            config,
            server,
            rt,
            client,
        }
    }

    fn request(&self, gpus: u32, command: &str) -> SubmitRequest {
        SubmitRequest {
            output: Some("/dev/null".into()),
            environment: [("PATH".to_string(), "/usr/bin:/bin".to_string())].into(),
            ..SubmitRequest::command("bench", command, self.dir.path(), gpus)
        }
    }

    fn submit_api(&self, gpus: u32, command: &str) -> u64 {
        let s: Submitted = self
            .rt
            .block_on(self.client.post("/v1/jobs", &self.request(gpus, command)))
            .unwrap();
        s.job_id
    }

    /// Runs `program` with `args` as a member of this pool would: its config, its directory.
    fn run(&self, program: &Path, args: &[&str]) -> std::process::Output {
        Command::new(program)
            .args(args)
            .env("LABPOOL_CONFIG", &self.config)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    fn cancel_all(&self, ids: Vec<u64>) {
        let ids = ids.into_iter().map(|i| i.to_string()).collect();
        let _: Vec<CancelOutcome> = self
            .rt
            .block_on(self.client.post("/v1/jobs/cancel", &CancelRequest { ids }))
            .unwrap();
    }

    /// Seconds to submit `n` jobs, one `sbatch` process after another: `sbatch` is `bin`, run
    /// with sbatch's own words, as a lab's shell loop runs it.
    fn sbatch_submits(&self, n: usize, bin: &Path) -> f64 {
        let args = [
            "--parsable",
            "--gres=gpu:1",
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ];
        self.one_process_each(n, bin, &args)
    }

    /// Seconds to submit `n` jobs, one `labpool submit` process after another.
    fn cli_submits(&self, n: usize) -> f64 {
        let args = [
            "submit",
            "--parsable",
            "--gpus",
            "1",
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ];
        self.one_process_each(n, &self.bin, &args)
    }

    /// Seconds to submit `n` jobs, one `program ARGS` process after another (each prints the
    /// job's id), while a first job holds both GPUs.
    fn one_process_each(&self, n: usize, program: &Path, args: &[&str]) -> f64 {
        let blocker = self.submit_api(2, "sleep 600");
        let t0 = Instant::now();
        let mut ids = vec![blocker];
        for _ in 0..n {
            let out = self.run(program, args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            ids.push(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap());
        }
        let secs = t0.elapsed().as_secs_f64();
        self.cancel_all(ids);
        secs
    }

    /// Seconds to submit `n` jobs through the API with `conc` submitters at once.
    fn api_submits(&self, n: usize, conc: usize) -> f64 {
        let blocker = self.submit_api(2, "sleep 600");
        let (secs, mut all) = self.timed_submits(n, conc);
        all.push(blocker);
        self.cancel_all(all);
        secs
    }

    /// `n` API submits from `conc` submitters at once: the seconds they took, and the ids.
    fn timed_submits(&self, n: usize, conc: usize) -> (f64, Vec<u64>) {
        let req = self.request(1, "true");
        let t0 = Instant::now();
        let ids: Vec<u64> = self.rt.block_on(async {
            let mut tasks = Vec::new();
            for w in 0..conc {
                let client = self.client.clone();
                let req = req.clone();
                let count = n / conc + usize::from(w < n % conc);
                tasks.push(tokio::spawn(async move {
                    let mut ids = Vec::with_capacity(count);
                    for _ in 0..count {
                        let s: Submitted = client.post("/v1/jobs", &req).await.unwrap();
                        ids.push(s.job_id);
                    }
                    ids
                }));
            }
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        });
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!(ids.len(), n);
        (secs, ids)
    }

    /// Milliseconds from the submit call to the job's first line, on an idle pool.
    fn latency_ms(&self) -> f64 {
        let stamp = self.dir.path().join(format!("stamp-{}", now_ns()));
        let t0 = now_ns();
        let id = self.submit_api(1, &format!("date +%s%N > {}", stamp.display()));
        let at = wait_stamp(&stamp, Duration::from_secs(30)).expect("labpool job never started");
        let ms = (at - t0) as f64 / 1e6;
        // Wait for the end too, so the next run finds the pool idle again.
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            let j: serde_json::Value = self
                .rt
                .block_on(self.client.get(&format!("/v1/jobs/{id}")))
                .unwrap();
            if j["state"] != "RUNNING" && j["state"] != "PENDING" {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        ms
    }
}

impl Drop for Labpool {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

struct Slurm {
    conf: PathBuf,
    jobs: PathBuf,
    version: String,
}

impl Slurm {
    fn start() -> Result<Slurm, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("not root: the Slurm peer needs root to start".into());
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/slurm/start.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let run = PathBuf::from(
            std::env::var("RUN").unwrap_or_else(|_| "/tmp/labpool-bench-slurm".into()),
        );
        let conf = run.join("etc/slurm.conf");
        let version = Command::new("sbatch")
            .arg("--version")
            .env("SLURM_CONF", &conf)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Ok(Slurm {
            conf,
            jobs: run.join("jobs"),
            version,
        })
    }

    /// Appends `SchedulerParameters=...` to the config and makes slurmctld reread it.
    fn tune(&self, params: &str) {
        let mut text = std::fs::read_to_string(&self.conf).unwrap();
        text.push_str(&format!("SchedulerParameters={params}\n"));
        std::fs::write(&self.conf, text).unwrap();
        assert!(
            self.cmd("scontrol")
                .arg("reconfigure")
                .status()
                .unwrap()
                .success()
        );
        std::thread::sleep(Duration::from_secs(2));
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .current_dir(&self.jobs)
            .stdin(Stdio::null());
        c
    }

    fn sbatch(&self, args: &[&str]) -> u64 {
        let out = self
            .cmd("sbatch")
            .arg("--parsable")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sbatch: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .split(';')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    fn cancel_all(&self) {
        let _ = self.cmd("scancel").args(["--user", "root"]).status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            let out = self
                .cmd("squeue")
                .args(["-h", "-t", "PD,R,CG"])
                .output()
                .unwrap();
            if out.stdout.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn cli_submits(&self, n: usize) -> f64 {
        self.sbatch(&["--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 600"]);
        let t0 = Instant::now();
        for _ in 0..n {
            self.sbatch(&["--gres=gpu:1", "-o", "/dev/null", "--wrap", "true"]);
        }
        let secs = t0.elapsed().as_secs_f64();
        self.cancel_all();
        secs
    }

    fn concurrent_submits(&self, n: usize, conc: usize) -> f64 {
        self.sbatch(&["--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 600"]);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for w in 0..conc {
                let count = n / conc + usize::from(w < n % conc);
                s.spawn(move || {
                    for _ in 0..count {
                        self.sbatch(&["--gres=gpu:1", "-o", "/dev/null", "--wrap", "true"]);
                    }
                });
            }
        });
        let secs = t0.elapsed().as_secs_f64();
        self.cancel_all();
        secs
    }

    fn latency_ms(&self) -> f64 {
        let stamp = self.jobs.join(format!("stamp-{}", now_ns()));
        let t0 = now_ns();
        let command = format!("date +%s%N > {}", stamp.display());
        self.sbatch(&["--gres=gpu:1", "-o", "/dev/null", "--wrap", &command]);
        let at = wait_stamp(&stamp, Duration::from_secs(60)).expect("Slurm job never started");
        let ms = (at - t0) as f64 / 1e6;
        self.cancel_all();
        ms
    }
}

fn main() {
    // `cargo bench` passes --bench; nothing else is taken.
    let n = env_num("BENCH_JOBS", 1000);
    let reps = env_num("BENCH_REPS", 3);
    let lat_reps = env_num("BENCH_LATENCY_REPS", 20);
    let conc = env_num("BENCH_CONCURRENCY", 16);
    println!(
        "submit benchmark: {n} jobs x {reps} runs, {conc} concurrent submitters, {lat_reps} latency samples"
    );

    let only_depth = std::env::var("BENCH_ONLY").is_ok_and(|v| v == "depth");
    let lp = Labpool::start();
    let slurm = if std::env::var_os("BENCH_NO_SLURM").is_some() {
        Err("BENCH_NO_SLURM is set".to_string())
    } else {
        Slurm::start()
    };
    if let Err(why) = &slurm {
        println!("Slurm peer unavailable ({why}); labpool figures only");
    }
    let slurm = slurm.ok();

    let depth_reps = env_num("BENCH_DEPTH_REPS", 1);
    let depth_jobs = env_num("BENCH_DEPTH_JOBS", 1000);
    let mut lp_depth: Vec<Vec<f64>> = vec![Vec::new(); depth::DEPTHS.len()];
    let mut sl_depth: Vec<Vec<f64>> = vec![Vec::new(); depth::DEPTHS.len()];
    for rep in 0..depth_reps {
        for (i, r) in lp.depth_sweep(depth_jobs, conc).into_iter().enumerate() {
            lp_depth[i].push(r);
        }
        if let Some(s) = &slurm {
            for (i, r) in s.depth_sweep(depth_jobs, conc).into_iter().enumerate() {
                sl_depth[i].push(r);
            }
        }
        println!("  depth sweep run {} done", rep + 1);
    }
    if depth_reps > 0 {
        let rows: Vec<depth::DepthRow> = depth::DEPTHS
            .iter()
            .enumerate()
            .map(|(i, d)| depth::DepthRow {
                depth: *d,
                labpool: median(lp_depth[i].clone()),
                slurm: (!sl_depth[i].is_empty()).then(|| median(sl_depth[i].clone())),
            })
            .collect();
        depth::print(&rows, depth_jobs, conc);
    }
    if only_depth {
        stop_slurm(slurm.is_some());
        return;
    }

    let (mut lp_cli, mut lp_api, mut sl_cli, mut sl_conc) = (vec![], vec![], vec![], vec![]);
    let (mut lp_sbatch, mut lp_slim) = (vec![], vec![]);
    let sbatch_link = lp.dir.path().join("sbatch");
    std::os::unix::fs::symlink(&lp.bin, &sbatch_link).unwrap();
    let slim = std::env::var_os("BENCH_SLIM").map(PathBuf::from);
    for rep in 0..reps {
        lp_sbatch.push(n as f64 / lp.sbatch_submits(n, &sbatch_link));
        if let Some(slim) = &slim {
            lp_slim.push(n as f64 / lp.sbatch_submits(n, slim));
            println!(
                "  slim {:.0}/s multicall sbatch {:.0}/s",
                lp_slim[rep], lp_sbatch[rep]
            );
        }
        lp_cli.push(n as f64 / lp.cli_submits(n));
        lp_api.push(n as f64 / lp.api_submits(n, conc));
        if let Some(s) = &slurm {
            sl_cli.push(n as f64 / s.cli_submits(n));
            sl_conc.push(n as f64 / s.concurrent_submits(n, conc));
        }
        println!(
            "  run {}: labpool cli {:.0}/s api {:.0}/s; slurm cli {}/s concurrent {}/s",
            rep + 1,
            lp_cli[rep],
            lp_api[rep],
            sl_cli.get(rep).map_or("-".into(), |v| format!("{v:.0}")),
            sl_conc.get(rep).map_or("-".into(), |v| format!("{v:.0}"))
        );
    }
    let lp_lat: Vec<f64> = (0..lat_reps).map(|_| lp.latency_ms()).collect();
    let sl_lat: Vec<f64> = match &slurm {
        Some(s) => (0..lat_reps).map(|_| s.latency_ms()).collect(),
        None => vec![],
    };
    // Slurm delays batch scheduling by up to 3 s by default (batch_sched_delay); measure it
    // tuned for latency as well, so the comparison does not rest on a default alone.
    let sl_lat_tuned: Vec<f64> = match &slurm {
        Some(s) => {
            s.tune("batch_sched_delay=0");
            (0..lat_reps).map(|_| s.latency_ms()).collect()
        }
        None => vec![],
    };

    let row = |what: &str, unit: &str, lp: &[f64], sl: &[f64], higher_is_better: bool| {
        let l = median(lp.to_vec());
        if sl.is_empty() {
            println!("| {what} | {l:.0} {unit} | - | - |");
        } else {
            let s = median(sl.to_vec());
            let ratio = if higher_is_better { l / s } else { s / l };
            println!("| {what} | {l:.1} {unit} | {s:.1} {unit} | {ratio:.1}x |");
        }
    };
    println!();
    println!(
        "labpool {} vs {}",
        env!("CARGO_PKG_VERSION"),
        slurm.as_ref().map_or("no Slurm", |s| s.version.as_str())
    );
    println!("| measurement (median) | labpool | Slurm | labpool advantage |");
    println!("|---|---|---|---|");
    row(
        &format!("submit {n} jobs, one CLI process each, sequential"),
        "jobs/s",
        &lp_cli,
        &sl_cli,
        true,
    );
    row(
        &format!("submit {n} jobs, one `sbatch` process each, sequential"),
        "jobs/s",
        &lp_sbatch,
        &sl_cli,
        true,
    );
    if !lp_slim.is_empty() {
        row("slim sbatch", "jobs/s", &lp_slim, &sl_cli, true);
    }
    row(
        &format!("submit {n} jobs, {conc} concurrent submitters (labpool API, Slurm sbatch)"),
        "jobs/s",
        &lp_api,
        &sl_conc,
        true,
    );
    row(
        "submit to job running, idle pool",
        "ms",
        &lp_lat,
        &sl_lat,
        false,
    );
    row(
        "submit to job running, idle pool, Slurm with batch_sched_delay=0",
        "ms",
        &lp_lat,
        &sl_lat_tuned,
        false,
    );
    let (lo, hi) = (
        lp_lat.iter().cloned().fold(f64::MAX, f64::min),
        lp_lat.iter().cloned().fold(0.0, f64::max),
    );
    println!(
        "labpool latency: min {lo:.1} ms, max {hi:.1} ms over {} samples",
        lp_lat.len()
    );
    stop_slurm(slurm.is_some());
}

/// Stops the Slurm peer when it was started.
fn stop_slurm(started: bool) {
    if started {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/slurm/stop.sh");
        let _ = Command::new("bash").arg(script).status();
    }
}
