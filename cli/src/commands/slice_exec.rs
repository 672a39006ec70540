//! `labpool slice-exec --mib N -- PROGRAM ARGS`: holds a sliced job to its slice where no
//! labpool agent started it (a batch script over Slurm; see the controller's `slurm_gate::submit`),
//! then becomes PROGRAM in the same process.
//!
//! It writes the slice library and a fresh account into a private directory, opens both on
//! descriptors above [`FIRST_FD`] that survive `exec`, removes the directory, and points the job
//! at the open files through `/proc/PID/fd/N`: every process of the job (children, `srun`
//! steps) reaches them there for as long as the job's first process lives, and nothing of them
//! is left on the node however the job ends. The descriptors are high so that a script's own
//! `exec 7>log` cannot take them. The card held is the first in `CUDA_VISIBLE_DEVICES`.

use anyhow::Context;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// The lowest descriptor the library and the account are kept on.
pub const FIRST_FD: i32 = 300;

/// Sets the slice up and execs `command`; returns only on failure.
pub fn run(mib: u64, command: &[String]) -> anyhow::Result<()> {
    anyhow::ensure!(
        mib > 0,
        "--mib 0: a GPU slice needs its memory in MiB (more than 0)"
    );
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!("slice-exec needs the program to run after --");
    };
    let tmp = std::env::var_os("TMPDIR")
        .filter(|d| Path::new(d).is_dir())
        .unwrap_or_else(|| "/tmp".into());
    let dir = tempfile::Builder::new()
        .prefix("labpool-slice-")
        .tempdir_in(&tmp)
        .with_context(|| {
            format!(
                "cannot make a private directory for the GPU slice in {}",
                Path::new(&tmp).display()
            )
        })?;
    let library = labpool_gpu_slice::install(dir.path())?;
    let account = labpool_gpu_slice::Account::create(dir.path(), mib)?;
    let library = keep_open(&library, false)?;
    let account = keep_open(&account, true)?;
    dir.close()
        .context("cannot remove the GPU slice's directory")?;
    let me = std::process::id();
    let gpu = std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .and_then(|v| v.split(',').next()?.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let own = std::env::var("LD_PRELOAD").ok();
    let vars = labpool_gpu_slice::environment(
        Path::new(&format!("/proc/{me}/fd/{library}")),
        Path::new(&format!("/proc/{me}/fd/{account}")),
        mib,
        gpu,
        own.as_deref(),
    );
    let err = std::process::Command::new(program)
        .args(args)
        .envs(vars)
        .exec();
    Err(err).with_context(|| format!("cannot run {program}"))
}

/// Opens `path` on a descriptor at or above [`FIRST_FD`] that stays open across `exec`.
fn keep_open(path: &Path, write: bool) -> anyhow::Result<i32> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let fd = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_DUPFD(FIRST_FD))
        .with_context(|| format!("cannot keep {} open", path.display()))?;
    // The low descriptor was only a step: it closes with `file`; the high one (F_DUPFD sets
    // no close-on-exec) stays.
    drop(file);
    Ok(fd)
}
