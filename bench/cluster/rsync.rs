//! The peer tool: `rsync -a` into several destinations at once, and the flush after it.

use crate::common::rsync_transferred;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// `rsync -a --stats [--bwlimit=KIB] SRC/ DST/` into every destination at once. Seconds, bytes.
pub fn rsync_all(src: &Path, dsts: &[PathBuf], kib: Option<u64>) -> (f64, u64) {
    let t0 = Instant::now();
    let children: Vec<Child> = dsts
        .iter()
        .map(|d| {
            let mut c = Command::new("rsync");
            c.arg("-a").arg("--stats");
            if let Some(k) = kib {
                c.arg(format!("--bwlimit={k}"));
            }
            c.arg(format!("{}/", src.display()))
                .arg(d)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("rsync runs (apt-get install rsync)")
        })
        .collect();
    let mut bytes = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "rsync failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bytes += rsync_transferred(&String::from_utf8_lossy(&out.stdout));
    }
    (t0.elapsed().as_secs_f64(), bytes)
}

/// How long a `sync` takes: the flush of what rsync left dirty.
pub fn sync_time() -> f64 {
    let t0 = Instant::now();
    nix::unistd::sync();
    t0.elapsed().as_secs_f64()
}
