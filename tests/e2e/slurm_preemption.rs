//! Differential: the same preemption on Slurm 22.05 (`PreemptMode=REQUEUE`, partition tiers,
//! the `lend` and `reclaim` partitions of `scripts/slurm-cluster`'s test cluster, 5 s of grace)
//! and on labpool (`--preemptible` jobs, an in-credit owner, 5 s of grace). A node's 8 GPUs are
//! held by two 4-GPU preemptible jobs started 2 s apart; an owner asks for 4. Both stop the
//! younger job, requeue it, keep the older one running, and start the owner; labpool no later
//! than Slurm.

use crate::pool::{Pool, s};
use crate::slurm_peer::slurm;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(90);

/// `sbatch --parsable` on the test cluster.
fn sbatch(conf: &Path, args: &[&str]) -> String {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(["--mem=1G", "-o", "/dev/null"])
        .args(args)
        .env("SLURM_CONF", conf)
        .current_dir("/tmp")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `KEY=value` fields of `scontrol show job -o`.
fn field(conf: &Path, job: &str, key: &str) -> String {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .env("SLURM_CONF", conf)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")).map(str::to_string))
        .unwrap_or_default()
}

fn wait_running(conf: &Path, job: &str) -> Duration {
    let t0 = Instant::now();
    while field(conf, job, "JobState") != "RUNNING" {
        assert!(t0.elapsed() < T, "Slurm job {job} never ran");
        std::thread::sleep(Duration::from_millis(200));
    }
    t0.elapsed()
}

#[test]
fn slurm_and_labpool_preempt_the_younger_job_and_requeue_it() {
    let Some(conf) = slurm("slurm_and_labpool_preempt_the_younger_job_and_requeue_it") else {
        return;
    };
    // Slurm.
    let lend = ["-p", "lend", "--gres=gpu:4", "--wrap", "sleep 300"];
    let old = sbatch(&conf, &lend);
    wait_running(&conf, &old);
    std::thread::sleep(Duration::from_secs(2));
    let young = sbatch(&conf, &lend);
    wait_running(&conf, &young);
    std::thread::sleep(Duration::from_secs(2));
    let owner = sbatch(
        &conf,
        &["-p", "reclaim", "--gres=gpu:4", "--wrap", "sleep 3"],
    );
    let slurm_wait = wait_running(&conf, &owner);
    let slurm_states = (
        field(&conf, &old, "JobState"),
        field(&conf, &young, "JobState"),
        field(&conf, &young, "Restarts"),
    );
    let _ = Command::new("scancel")
        .args([&old, &young, &owner])
        .env("SLURM_CONF", &conf)
        .status();
    assert_eq!(
        slurm_states,
        ("RUNNING".into(), "PENDING".into(), "1".into()),
        "Slurm requeued the younger job"
    );

    // labpool.
    let mut pool = Pool::new("8:a100");
    pool.edit_config(|t| {
        t.replace("grace = \"2m\"", "grace = \"5s\"")
            .replace("min_runtime = \"10m\"", "min_runtime = \"0s\"")
    });
    pool.start();
    let lend = ["--preemptible", "--gpus", "4", "--wrap", "sleep 300"];
    let old = pool.submit(&lend);
    pool.wait_for(old, T, |j| s(j, "state") == "RUNNING");
    std::thread::sleep(Duration::from_secs(2));
    let young = pool.submit(&lend);
    pool.wait_for(young, T, |j| s(j, "state") == "RUNNING");
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let owner = pool.submit(&["--gpus", "4", "--wrap", "sleep 3"]);
    pool.wait_for(owner, T, |j| s(j, "state") == "RUNNING");
    let labpool_wait = t0.elapsed();
    let (o, y) = (pool.job(old), pool.job(young));
    assert_eq!(s(&o, "state"), "RUNNING", "{o:#}");
    assert_eq!(
        (s(&y, "state"), s(&y, "reason")),
        ("PENDING", "Preempted"),
        "{y:#}"
    );
    eprintln!("owner waited: Slurm {slurm_wait:?}, labpool {labpool_wait:?}");
    assert!(
        labpool_wait <= slurm_wait + Duration::from_secs(5),
        "labpool's owner waited {labpool_wait:?}, Slurm's {slurm_wait:?}"
    );
    assert!(labpool_wait < Duration::from_secs(5 + 30));
    for id in [old, young, owner] {
        pool.ok(&["cancel", &id.to_string()]);
    }
}
