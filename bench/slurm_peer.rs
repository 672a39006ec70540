//! The Slurm 22.05 peer the benchmarks run beside labpool: the four-node test cluster of
//! `scripts/slurm-cluster`, started if it is not running (root only).

use crate::common::run;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Slurm 22.05 test cluster of `scripts/slurm-cluster` (started if it is not running).
pub struct Slurm {
    conf: String,
    /// `sbatch --version`.
    pub version: String,
}

impl Slurm {
    /// The running cluster, or why there is none.
    pub fn start() -> Result<Slurm, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("not root: scripts/slurm-cluster needs root".into());
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-cluster");
        let started = Command::new(&script)
            .arg("start")
            .output()
            .map_err(|e| e.to_string())?;
        if !started.status.success() {
            return Err(format!(
                "scripts/slurm-cluster start failed: {}",
                String::from_utf8_lossy(&started.stderr).trim()
            ));
        }
        let env = run(Command::new(&script).arg("env"));
        let conf = env
            .trim()
            .trim_start_matches("export SLURM_CONF=")
            .to_string();
        let version = run(Command::new("sbatch")
            .arg("--version")
            .env("SLURM_CONF", &conf));
        Ok(Slurm {
            version: version.trim().to_string(),
            conf,
        })
    }

    /// A Slurm command aimed at the cluster.
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf).stdin(Stdio::null());
        c
    }

    /// Submits `script` from `dir` with its output in `dir/job.out`; the job's id.
    pub fn sbatch(&self, dir: &Path, script: &Path) -> String {
        let id = run(self
            .cmd("sbatch")
            .current_dir(dir)
            .args(["--parsable", "-o"])
            .arg(dir.join("job.out"))
            .arg(script));
        id.trim().split(';').next().unwrap_or_default().to_string()
    }

    /// Waits (up to 30 s) until job `id` has left the queue, so that the next run finds the
    /// cluster idle.
    pub fn wait_gone(&self, id: &str) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30)
            && !run(self.cmd("squeue").args(["-h", "-j", id]))
                .trim()
                .is_empty()
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The peer, unless `BENCH_NO_SLURM` is set or it cannot start; says why when there is none.
pub fn peer_or_skip() -> Option<Slurm> {
    let slurm = if std::env::var_os("BENCH_NO_SLURM").is_some() {
        Err("BENCH_NO_SLURM is set".to_string())
    } else {
        Slurm::start()
    };
    if let Err(why) = &slurm {
        println!("Slurm peer unavailable ({why}); the Slurm column is skipped");
    }
    slurm.ok()
}
