//! A day of heavy load on one pool: N jobs submitted by C clients at once (each `labpool
//! submit` a process of its own, as members' scripts submit), the controller killed with
//! SIGKILL K times while they submit and started again at once. Every job appends its id to
//! one file, so a job that ran twice or never is seen.
//!
//! ```text
//! cargo bench --bench load                                # 10,000 jobs, 20 clients, 4 kills
//! LOAD_JOBS=2000 LOAD_CLIENTS=10 LOAD_KILLS=2 cargo bench --bench load
//! ```
//!
//! Printed: jobs that ran once, twice or never; client retries (a submit that lost its answer
//! and was sent again with the same key, and one sent again because the controller was down,
//! as a member's script would); the drain rate, jobs per second from the first submit
//! to the last job's end; the controller's resident memory once idle after the load, against
//! its size once restarted on the same database, and their ratio; and the slow statements the
//! controller logged. The pool has one node of 8 virtual GPUs and each job holds one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "common.rs"]
mod common;
use common::env_num;

struct Pool {
    bin: PathBuf,
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Pool {
    fn serve(&self) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("serve.out"))
            .unwrap();
        let child = Command::new(&self.bin)
            .arg("serve")
            .env("LABPOOL_CONFIG", &self.config)
            .env("LABPOOL_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !self.cli(&["queue", "--me"]).status.success() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "serve did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.bin)
            .args(args)
            .env("LABPOOL_CONFIG", &self.config)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }
}

/// One `/proc/PID/status` line's value (`VmRSS`, `RssAnon`, `RssFile`), MiB.
fn status_mib(pid: u32, key: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(&format!("{key}:")))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Resident memory of `pid`, MiB, with its anonymous and file-backed parts.
fn rss_mib(pid: u32) -> (f64, f64, f64) {
    (
        status_mib(pid, "VmRSS"),
        status_mib(pid, "RssAnon"),
        status_mib(pid, "RssFile"),
    )
}

/// Lines of `path` (the job ids that ran, one a line).
fn ran(path: &Path) -> Vec<u64> {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

fn main() {
    let jobs: usize = env_num("LOAD_JOBS", 10_000);
    let clients: usize = env_num("LOAD_CLIENTS", 20);
    let kills: usize = env_num("LOAD_KILLS", 4);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_labpool"));
    let (dir, config, first) = common::start_labpool(&bin, "lp-load-", |t| t);
    let mut first = first;
    let _ = first.kill();
    let _ = first.wait();
    // One node of 8 GPUs; the output of the jobs goes nowhere, their ids to one file.
    let _ = std::fs::remove_file(dir.path().join("serve.out"));
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace("2:rtx4090", "8:rtx4090");
    std::fs::write(&config, text).unwrap();
    let pool = Pool { bin, dir, config };
    let ran_file = pool.dir.path().join("ran.txt");
    let server = Arc::new(Mutex::new(pool.serve()));

    let submitted = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let pool = Arc::new(pool);
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (pool, submitted, retries, failed, refused) = (
                pool.clone(),
                submitted.clone(),
                retries.clone(),
                failed.clone(),
                refused.clone(),
            );
            let script = format!("echo $LABPOOL_JOB_ID >> {}", ran_file.display());
            std::thread::spawn(move || {
                for _ in (c..jobs).step_by(clients) {
                    // A controller that is down (not yet restarted) is tried again: nothing was
                    // sent, so nothing can be queued twice.
                    let out = loop {
                        let out = pool.cli(&[
                            "submit",
                            "--parsable",
                            "--gpus",
                            "1",
                            "-o",
                            "/dev/null",
                            "--wrap",
                            &script,
                        ]);
                        if String::from_utf8_lossy(&out.stderr)
                            .contains("cannot reach the labpool controller")
                        {
                            refused.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(200));
                            continue;
                        }
                        break out;
                    };
                    let err = String::from_utf8_lossy(&out.stderr);
                    retries.fetch_add(
                        err.matches("trying again with the same submit id").count(),
                        Ordering::Relaxed,
                    );
                    if out.status.success() {
                        submitted.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        eprintln!("a submit failed: {err}");
                    }
                }
            })
        })
        .collect();
    // The kills, spread over the submitting.
    for k in 1..=kills {
        let at = jobs * k / (kills + 1);
        while submitted.load(Ordering::Relaxed) < at {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut s = server.lock().unwrap();
        let _ = s.kill();
        let _ = s.wait();
        eprintln!(
            "load: kill -9 {k} of {kills} at {at} submits ({:.0} s)",
            t0.elapsed().as_secs_f64()
        );
        *s = pool.serve();
    }
    for w in workers {
        w.join().unwrap();
    }
    let submit_s = t0.elapsed().as_secs_f64();
    eprintln!("load: {jobs} submits in {submit_s:.0} s; draining");
    // Drained: every job ran (its id is in the file) and the queue is empty.
    let mut last = (0, Instant::now());
    loop {
        let n = ran(&ran_file).len();
        if n != last.0 {
            last = (n, Instant::now());
        }
        if n >= jobs {
            let q = pool.cli(&["queue", "--json"]);
            let queued: Vec<serde_json::Value> =
                serde_json::from_slice(&q.stdout).unwrap_or_default();
            if q.status.success() && queued.is_empty() {
                break;
            }
        }
        if last.1.elapsed() > Duration::from_secs(120) {
            eprintln!("load: no progress for 120 s at {n} of {jobs} jobs");
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let drain_s = t0.elapsed().as_secs_f64();
    let ids = ran(&ran_file);
    let mut counts = std::collections::BTreeMap::<u64, usize>::new();
    for id in &ids {
        *counts.entry(*id).or_default() += 1;
    }
    let twice = counts.values().filter(|c| **c > 1).count();
    let once = counts.values().filter(|c| **c == 1).count();
    let never = jobs.saturating_sub(counts.len());
    // Idle after the load, then restarted on the same database and idle again.
    std::thread::sleep(Duration::from_secs(15));
    let pid = server.lock().unwrap().id();
    let loaded = rss_mib(pid);
    {
        let mut s = server.lock().unwrap();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(s.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = s.wait();
        *s = pool.serve();
    }
    std::thread::sleep(Duration::from_secs(15));
    let restarted = rss_mib(server.lock().unwrap().id());
    let log = std::fs::read_to_string(pool.dir.path().join("serve.out")).unwrap_or_default();
    let slow = log.lines().filter(|l| l.contains("slow statement")).count();
    println!("| what | value |");
    println!("| --- | --- |");
    println!("| jobs, clients, kill -9s | {jobs}, {clients}, {kills} |");
    println!("| ran once / twice / never | {once} / {twice} / {never} |");
    println!(
        "| submits failed / retried after a lost answer / sent again to a stopped controller | {} / {} / {} |",
        failed.load(Ordering::Relaxed),
        retries.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed)
    );
    println!("| submitting took | {submit_s:.1} s |");
    println!(
        "| drain rate (first submit to last end) | {:.1} jobs/s |",
        jobs as f64 / drain_s
    );
    println!(
        "| controller idle after the load (anonymous, file) | {:.0} MiB ({:.0}, {:.0}) |",
        loaded.0, loaded.1, loaded.2
    );
    println!(
        "| controller idle, restarted on the same database (anonymous, file) | {:.0} MiB ({:.0}, {:.0}) |",
        restarted.0, restarted.1, restarted.2
    );
    println!(
        "| after load / restarted: resident, anonymous | {:.2}x, {:.2}x |",
        loaded.0 / restarted.0.max(1.0),
        loaded.1 / restarted.1.max(1.0)
    );
    println!("| slow statements logged | {slow} |");
    let mut s = server.lock().unwrap();
    let _ = s.kill();
    let _ = s.wait();
}
