//! Timing one process: under GNU time for its peak RSS, by wall clock, with the flush after it,
//! cold (the caches dropped first) or warm.

use crate::common::run;
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Flushes what is dirty to disk.
pub fn sync() {
    nix::unistd::sync();
}

/// Empties the page cache, dentries and inodes; false without the right (not root).
pub fn drop_caches() -> bool {
    sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// One timed process: wall seconds, the flush after it, its peak RSS and what it printed.
pub struct Ran {
    pub secs: f64,
    pub sync_secs: f64,
    pub rss_mib: f64,
    pub out: String,
}

/// Runs `program args` under GNU time, timing it by wall clock; `cold` drops the caches first.
pub fn measure(program: &Path, args: &[OsString], env: Option<(&str, &str)>, cold: bool) -> Ran {
    let rss_file =
        std::env::temp_dir().join(format!("labpool-bench-quota-rss-{}", std::process::id()));
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(program)
        .args(args);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    sync();
    if cold {
        assert!(drop_caches(), "dropping the caches needs root");
    }
    let t0 = Instant::now();
    let out = run(&mut cmd);
    let secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    sync();
    let sync_secs = t1.elapsed().as_secs_f64();
    let rss = std::fs::read_to_string(&rss_file).unwrap();
    let _ = std::fs::remove_file(&rss_file);
    let kib: f64 = rss.lines().last().unwrap().trim().parse().unwrap();
    Ran {
        secs,
        sync_secs,
        rss_mib: kib / 1024.0,
        out,
    }
}
