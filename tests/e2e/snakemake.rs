//! snakemake with `snakemake-executor-plugin-slurm`, unchanged from PyPI (the versions
//! `scripts/test` pins), against labpool's Slurm commands: a two-rule workflow whose second rule
//! asks for a GPU completes, and a failing rule is reported failed with its state. The
//! workflows are in `tests/python/snakemake/`.

use crate::pool::{Pool, has};
use crate::submitit::{pylibs_python, python_with_slurm};
use std::path::Path;
use std::process::Output;

/// Runs snakemake's slurm executor on `snakefile` in the pool's work directory.
fn snakemake(pool: &Pool, python: &Path, snakefile: &str) -> Output {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/snakemake");
    std::fs::copy(src.join(snakefile), pool.work.join("Snakefile")).unwrap();
    python_with_slurm(pool, python)
        .args([
            "-m",
            "snakemake",
            "--executor",
            "slurm",
            "--jobs",
            "2",
            "--latency-wait",
            "10",
            // The plugin's own setting: its first look comes after 1 s instead of 40.
            "--slurm-init-seconds-before-status-checks",
            "1",
        ])
        .env("HOME", &pool.work)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn snakemake_two_rule_workflow_with_a_gpu_rule_completes() {
    let Some(python) = pylibs_python("snakemake_two_rule_workflow_with_a_gpu_rule_completes")
    else {
        return;
    };
    let mut pool = Pool::new("2:a100");
    pool.start();
    let out = snakemake(&pool, &python, "Snakefile");
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    let trained = std::fs::read_to_string(pool.work.join("trained.txt")).unwrap();
    has(&trained, &["prepared"]);
    // The GPU rule ran with one GPU of its own.
    let gpus = trained
        .lines()
        .find_map(|l| l.strip_prefix("gpus="))
        .unwrap();
    assert_eq!(gpus.split(',').count(), 1, "{trained}");
    assert!(!gpus.is_empty(), "{trained}");
}

#[test]
fn snakemake_failing_rule_is_reported_failed_with_its_state() {
    let Some(python) = pylibs_python("snakemake_failing_rule_is_reported_failed_with_its_state")
    else {
        return;
    };
    let mut pool = Pool::new("1:a100");
    pool.start();
    let out = snakemake(&pool, &python, "Snakefile.failing");
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    has(&log, &["Error in rule broken", "SLURM status is: 'FAILED'"]);
}
