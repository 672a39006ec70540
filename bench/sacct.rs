//! `sacct -j` as Slurm libraries poll it: submitit asks for the state of every job in flight,
//! one `-j` each, every few seconds. labpool's `sacct` against Slurm 22.05's, on the same
//! machine, in one run, with the ratio.
//!
//! ```text
//! cargo bench --bench sacct                   # as root: the Slurm side uses scripts/slurm-cluster
//! BENCH_JOBS=100000 BENCH_IDS=50 BENCH_REPS=20 cargo bench --bench sacct
//! BENCH_NO_SLURM=1 cargo bench --bench sacct  # labpool alone
//! ```
//!
//! labpool: a pool (`labpool init --virtual-gpus` + `labpool serve`) runs one job to its end;
//! its row is then copied `BENCH_JOBS` times into the pool's SQLite database (ended jobs, as a
//! year of a busy lab leaves them), and `sacct -o JobID,State,NodeList --parsable2` with
//! `BENCH_IDS` `-j` options spread over that history is timed, through labpool's `sacct` name.
//! Slurm: the same command with as many `-j` on the test cluster's accounting database, whatever
//! its history holds (filling slurmdbd with 100,000 jobs is out of reach of a benchmark run, so
//! the peer's figure is for a short history: the ratio flatters Slurm).

#[path = "common.rs"]
mod common;
#[allow(dead_code)]
#[path = "slurm_peer.rs"]
mod slurm_peer;
use common::{env_num, median, run, start_labpool};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Times `cmd` `reps` times; the runs in ms, each checked to have succeeded.
fn time(reps: usize, mut cmd: impl FnMut() -> Command) -> Vec<f64> {
    (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            let out = cmd().output().unwrap();
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            assert!(out.status.success(), "{out:?}");
            ms
        })
        .collect()
}

/// Copies job `from`'s row `n` times into the database at `db`, with ids after `first`.
fn fill_history(db: &Path, from: u64, first: u64, n: u64) {
    let columns = run(Command::new("sqlite3")
        .arg(db)
        .arg("SELECT group_concat(name, ',') FROM pragma_table_info('jobs') WHERE name <> 'id'"));
    let columns = columns.trim();
    let sql = format!(
        "PRAGMA journal_mode=WAL; BEGIN; \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
         INSERT INTO jobs (id, {columns}) SELECT {first} + i, {columns} FROM n, jobs WHERE jobs.id = {from}; \
         COMMIT;"
    );
    run(Command::new("sqlite3").arg(db).arg(sql));
}

fn main() {
    let jobs: u64 = env_num("BENCH_JOBS", 100_000);
    let ids: u64 = env_num("BENCH_IDS", 50).max(1);
    let reps: usize = env_num("BENCH_REPS", 20).max(1);
    println!("sacct benchmark: {ids} -j over a history of {jobs} jobs, {reps} runs each");
    let slurm = slurm_peer::peer_or_skip();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_labpool"));
    let (dir, config, mut server) = start_labpool(&bin, "lp-bench-sacct-", |t| t);
    let lp = |args: &[&str]| {
        let mut c = Command::new(&bin);
        c.args(args)
            .env("LABPOOL_CONFIG", &config)
            .current_dir(dir.path())
            .stdin(Stdio::null());
        c
    };
    let t0 = Instant::now();
    while !lp(&["queue"]).output().unwrap().status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "labpool serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let id: u64 = run(&mut lp(&["submit", "--parsable", "--wrap", "true"]))
        .trim()
        .parse()
        .unwrap();
    while !run(&mut lp(&["history", "--json"])).contains("\"COMPLETED\"") {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "job {id} did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let db = dir.path().join("state/labpool.db");
    let filled = Instant::now();
    fill_history(&db, id, 1000, jobs);
    println!(
        "history of {jobs} jobs written in {:.1} s",
        filled.elapsed().as_secs_f64()
    );
    let links = dir.path().join("slurm-bin");
    run(&mut lp(&[
        "install-slurm-commands",
        links.to_str().unwrap(),
    ]));
    let step = (jobs / ids).max(1);
    let mut args: Vec<String> = ["-o", "JobID,State,NodeList", "--parsable2"]
        .map(String::from)
        .to_vec();
    for k in 0..ids {
        args.push("-j".into());
        args.push((1000 + 1 + k * step).to_string());
    }
    let lines = run(Command::new(links.join("sacct"))
        .args(&args)
        .env("LABPOOL_CONFIG", &config));
    assert!(
        lines.lines().count() > ids as usize,
        "labpool's sacct found too few of the jobs:\n{lines}"
    );
    let lp_ms = median(time(reps, || {
        let mut c = Command::new(links.join("sacct"));
        c.args(&args).env("LABPOOL_CONFIG", &config);
        c
    }));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = server.wait();
    let peer_ms = slurm.map(|s| {
        let mut peer_args: Vec<String> = ["-o", "JobID,State,NodeList", "--parsable2"]
            .map(String::from)
            .to_vec();
        for k in 1..=ids {
            peer_args.push("-j".into());
            peer_args.push(k.to_string());
        }
        median(time(reps, || {
            let mut c = s.cmd("sacct");
            c.args(&peer_args);
            c
        }))
    });
    println!(
        "\n| `sacct -j` × {ids} (median of {reps}) | labpool ({jobs} jobs) | Slurm 22.05 (its test history) | ratio |"
    );
    println!("|---|---|---|---|");
    match peer_ms {
        Some(p) => println!(
            "| one call | {lp_ms:.1} ms | {p:.1} ms | labpool {:.1}× faster |",
            p / lp_ms
        ),
        None => println!("| one call | {lp_ms:.1} ms | - | - |"),
    }
}
