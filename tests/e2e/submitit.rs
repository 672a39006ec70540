//! submitit, unchanged from PyPI (the version `scripts/test` pins), against labpool's Slurm
//! commands: its README example with three jobs at once, a cancelled job and an array task
//! that dies without a result each raising within a minute, and a `Checkpointable` job that
//! gets its signal, checkpoints, is requeued (through `srun`, submitit's default) and finishes.
//! The flows are `tests/python/submitit_flows.py`.

use crate::pool::{Pool, strict};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python of the venv that holds the pinned libraries (`LABPOOL_PYLIBS`, set by
/// `scripts/test`), or `None` (the test skips) outside strict runs.
pub fn pylibs_python(test: &str) -> Option<PathBuf> {
    let python = std::env::var_os("LABPOOL_PYLIBS").map(|d| Path::new(&d).join("bin/python"));
    match python {
        Some(p) if p.exists() => Some(p),
        _ => {
            assert!(
                !strict(),
                "{test} needs the pinned Python libraries (scripts/test installs them and sets LABPOOL_PYLIBS)"
            );
            eprintln!("SKIPPED {test}: LABPOOL_PYLIBS is not set");
            None
        }
    }
}

/// `python` as a library's user runs it: in the pool's work directory, with the pool's config
/// and its Slurm command names (linked on first use) first on `PATH`.
pub fn python_with_slurm(pool: &Pool, python: &Path) -> Command {
    pool.slurm("sinfo", &["-h"]);
    let path = format!(
        "{}:{}",
        pool.dir.join("slurm-bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(python);
    cmd.env("PATH", path)
        .env("LABPOOL_CONFIG", &pool.config)
        .current_dir(&pool.work);
    cmd
}

/// Runs a Python program with the pool's Slurm commands first on `PATH`; its output, the
/// program having succeeded.
pub fn run_python(pool: &Pool, python: &Path, args: &[&str]) -> String {
    let out = python_with_slurm(pool, python).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{args:?} failed:\n{text}");
    text
}

fn flow(test: &str, name: &str) {
    let Some(python) = pylibs_python(test) else {
        return;
    };
    let mut pool = Pool::new("2:a100");
    pool.start();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/submitit_flows.py");
    let folder = pool.work.join("submitit");
    let out = run_python(
        &pool,
        &python,
        &[driver.to_str().unwrap(), name, folder.to_str().unwrap()],
    );
    assert!(out.contains(&format!("ok {name}")), "{out}");
}

#[test]
fn submitit_readme_example_with_three_jobs_at_once() {
    flow("submitit_readme_example_with_three_jobs_at_once", "readme");
}

#[test]
fn submitit_cancelled_job_raises_within_a_minute() {
    flow("submitit_cancelled_job_raises_within_a_minute", "cancelled");
}

#[test]
fn submitit_array_task_dead_without_a_result_raises_within_a_minute() {
    flow(
        "submitit_array_task_dead_without_a_result_raises_within_a_minute",
        "array_death",
    );
}

#[test]
fn submitit_checkpointable_job_is_signalled_requeued_and_finishes() {
    flow(
        "submitit_checkpointable_job_is_signalled_requeued_and_finishes",
        "checkpoint",
    );
}
