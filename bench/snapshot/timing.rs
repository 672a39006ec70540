//! Timing one process: under GNU time for its peak RSS, by wall clock after a `sync`, with the
//! flush after it; and a repository's size on disk.

use crate::common::run;
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// `du -sb`: bytes on disk, a hard-linked file counted once.
pub fn du(p: &Path) -> f64 {
    let out = run(Command::new("du").arg("-sb").arg(p));
    out.split_whitespace().next().unwrap().parse().unwrap()
}

fn sync() {
    nix::unistd::sync();
}

/// How long a `sync` takes: the flush of what the last tool left dirty.
fn sync_time() -> f64 {
    let t0 = Instant::now();
    sync();
    t0.elapsed().as_secs_f64()
}

/// One timed process: wall seconds, then the flush after it, and its peak RSS.
pub struct Ran {
    pub secs: f64,
    pub sync_secs: f64,
    pub rss_mib: f64,
    pub out: String,
}

/// Runs `program args` under GNU time after a `sync`, timing it by wall clock.
pub fn measure(
    program: &Path,
    args: &[OsString],
    envs: &[(&str, OsString)],
    scratch: &Path,
) -> Ran {
    let rss_file = scratch.join("rss");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(program)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)));
    sync();
    let t0 = Instant::now();
    let out = run(&mut cmd);
    let secs = t0.elapsed().as_secs_f64();
    let sync_secs = sync_time();
    let rss = std::fs::read_to_string(&rss_file).unwrap();
    let kib: f64 = rss.lines().last().unwrap().trim().parse().unwrap();
    Ran {
        secs,
        sync_secs,
        rss_mib: kib / 1024.0,
        out,
    }
}
