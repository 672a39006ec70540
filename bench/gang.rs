//! A 2-node job's start: the time from submit until every rank runs, labpool beside Slurm
//! 22.05 on the same machine, in one run, with the ratio.
//!
//! ```text
//! cargo bench --bench gang                  # as root: the Slurm side uses scripts/slurm-cluster
//! BENCH_REPS=20 cargo bench --bench gang    # jobs timed per system (default 10)
//! BENCH_NO_SLURM=1 cargo bench --bench gang # labpool alone
//! ```
//!
//! The same batch script (`#SBATCH -N 2 --ntasks-per-node=1 -c 1 --mem=100M`, then
//! `srun bash -c 'date +%s%N > DIR/rank$SLURM_PROCID'`) is submitted `BENCH_REPS` times, one
//! job at a time, to each system: to a labpool pool of a controller (`local_node = false`) and
//! two `labpool agent` processes on loopback, and to the four-node Slurm test cluster with
//! `sbatch`. The time of a job is from just before the submit command runs to the later of
//! its two ranks' clocks: placement on both nodes, the start on each, the batch script, and
//! `srun` reaching the other node. Both systems run on this machine, so the nodes share its
//! clock.

#[path = "common.rs"]
mod common;
#[path = "slurm_peer.rs"]
mod slurm_peer;
use common::{bench_base, env_num, median, run, scratch_dir};
use slurm_peer::Slurm;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Writes the script into `dir`; its ranks write their start times there.
fn write_script(dir: &Path) -> PathBuf {
    let d = dir.display();
    let text = format!(
        "#!/bin/bash\n#SBATCH -J gang-bench -N 2 --ntasks-per-node=1 -c 1 --mem=100M\n\
         srun bash -c 'date +%s%N > {d}/rank$SLURM_PROCID'\n"
    );
    std::fs::write(dir.join("job.sh"), text).unwrap();
    dir.join("job.sh")
}

/// Waits for both ranks' files; the later start, ns since the epoch.
fn ranks_started(dir: &Path, timeout: Duration, who: &str) -> u128 {
    let t0 = Instant::now();
    loop {
        let read = |r: u32| {
            std::fs::read_to_string(dir.join(format!("rank{r}")))
                .ok()
                .and_then(|t| t.trim().parse::<u128>().ok())
        };
        if let (Some(a), Some(b)) = (read(0), read(1)) {
            return a.max(b);
        }
        assert!(
            t0.elapsed() < timeout,
            "{who}: the ranks did not start in {timeout:?} (see {})",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A controller and two agents on loopback, stopped with TERM when dropped.
struct Labpool {
    bin: PathBuf,
    dir: tempfile::TempDir,
    config: PathBuf,
    children: Vec<Child>,
}

impl Labpool {
    fn start() -> Labpool {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_labpool"));
        let dir = tempfile::Builder::new()
            .prefix("lp-bench-gang-")
            .tempdir_in("/tmp")
            .unwrap();
        run(Command::new(&bin).arg("init").arg("--dir").arg(dir.path()));
        let config = dir.path().join("labpool.toml");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let join = format!("127.0.0.1:{port}");
        let text = std::fs::read_to_string(&config).unwrap().replacen(
            "[controller]\n",
            &format!("[controller]\nlisten = \"{join}\"\nlocal_node = false\n"),
            1,
        );
        std::fs::write(&config, text).unwrap();
        let mut lp = Labpool {
            bin,
            dir,
            config,
            children: Vec::new(),
        };
        lp.spawn("serve", &lp.config.clone(), "serve.out");
        for name in ["bn1", "bn2"] {
            let agent_dir = lp.dir.path().join(name);
            run(Command::new(&lp.bin)
                .args(["init", "--dir"])
                .arg(&agent_dir)
                .args(["--join", &join, "--key"])
                .arg(lp.dir.path().join("cluster.key"))
                .args(["--name", name, "--listen", "127.0.0.1:0"]));
            let cfg = agent_dir.join("labpool.toml");
            let text = std::fs::read_to_string(&cfg)
                .unwrap()
                .replace("heartbeat = \"10s\"", "heartbeat = \"1s\"");
            std::fs::write(&cfg, text).unwrap();
            lp.spawn("agent", &cfg, &format!("{name}.out"));
        }
        let t0 = Instant::now();
        loop {
            let out = lp.cmd().args(["nodes", "--json"]).output().unwrap();
            let up = String::from_utf8_lossy(&out.stdout)
                .matches("\"agent\": \"")
                .count();
            if out.status.success() && up == 2 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the pool did not come up: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        lp
    }

    fn spawn(&mut self, what: &str, config: &Path, log: &str) {
        let log = std::fs::File::create(self.dir.path().join(log)).unwrap();
        let child = Command::new(&self.bin)
            .arg(what)
            .env("LABPOOL_CONFIG", config)
            .env("LABPOOL_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("LABPOOL_CONFIG", &self.config)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        c
    }

    /// One job: ms from submit to both ranks running; waits for its end.
    fn once(&self, out: &Path, timeout: Duration) -> f64 {
        let file = write_script(out);
        let t0 = now_ns();
        let id = run(self
            .cmd()
            .args(["submit", "--parsable", "-o"])
            .arg(out.join("job.out"))
            .arg(file));
        let started = ranks_started(out, timeout, "labpool");
        let t = Instant::now();
        while !run(self.cmd().args(["show", id.trim()])).contains("COMPLETED") {
            assert!(t.elapsed() < timeout, "labpool: job {id} did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
        (started - t0) as f64 / 1e6
    }
}

impl Drop for Labpool {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let pid = nix::unistd::Pid::from_raw(c.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let _ = c.wait();
        }
    }
}

/// One job on the Slurm peer: ms from submit to both ranks running; waits for its end.
fn slurm_once(slurm: &Slurm, out: &Path, timeout: Duration) -> f64 {
    let file = write_script(out);
    let t0 = now_ns();
    let id = slurm.sbatch(out, &file);
    let started = ranks_started(out, timeout, "Slurm");
    slurm.wait_gone(&id);
    (started - t0) as f64 / 1e6
}

fn main() {
    let reps: usize = env_num("BENCH_REPS", 10).max(1);
    let timeout = Duration::from_secs(60);
    println!("2-node start benchmark: {reps} jobs per system, one at a time");
    let slurm = slurm_peer::peer_or_skip();
    let base = bench_base();
    let lp = Labpool::start();
    let lp_ms: Vec<f64> = (0..reps)
        .map(|i| {
            let dir = scratch_dir(&base, &format!("gang-labpool-{i}"));
            lp.once(dir.path(), timeout)
        })
        .collect();
    drop(lp);
    let sl_ms: Option<Vec<f64>> = slurm.as_ref().map(|s| {
        (0..reps)
            .map(|i| {
                let dir = scratch_dir(&base, &format!("gang-slurm-{i}"));
                slurm_once(s, dir.path(), timeout)
            })
            .collect()
    });
    println!();
    println!(
        "labpool {} vs {}",
        env!("CARGO_PKG_VERSION"),
        slurm.as_ref().map_or("no Slurm", |s| s.version.as_str())
    );
    let range = |v: &[f64]| {
        let lo = v.iter().cloned().fold(f64::MAX, f64::min);
        let hi = v.iter().cloned().fold(0.0, f64::max);
        format!("{lo:.0} to {hi:.0} ms")
    };
    println!(
        "| submit to all ranks running, -N 2, {reps} jobs | labpool median | labpool range | Slurm median | Slurm range | Slurm / labpool (median) |"
    );
    println!("|---|---|---|---|---|---|");
    let lm = median(lp_ms.clone());
    match &sl_ms {
        Some(sl) => {
            let sm = median(sl.clone());
            println!(
                "| 2 nodes, 1 rank each | {lm:.0} ms | {} | {sm:.0} ms | {} | {:.1}x |",
                range(&lp_ms),
                range(sl),
                sm / lm
            );
        }
        None => println!(
            "| 2 nodes, 1 rank each | {lm:.0} ms | {} | - | - | - |",
            range(&lp_ms)
        ),
    }
}
