//! Helpers shared by the quotas crate's integration tests: root and tool checks, loud skips,
//! file makers, setting times without following links, and mounts undone on drop.
#![allow(dead_code)]

use nix::sys::stat::{UtimensatFlags, utimensat};
use nix::sys::time::TimeSpec;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One day in seconds.
pub const DAY: i64 = 86_400;

/// Whether the tests run as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Says loudly that a check was skipped, and fails in strict mode (CI, which runs as root
/// with the packages installed).
pub use labpool_testkit::skip as skipped;

/// Whether `name` is an executable on the PATH.
pub fn have(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Runs a command; its stdout, or a panic with what it printed.
pub fn sh(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Seconds since the epoch, now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Sets atime and mtime of `path` (a link itself, not its target) to `secs`.
pub fn set_times(path: &Path, secs: i64) {
    let t = TimeSpec::new(secs, 0);
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &t,
        &t,
        UtimensatFlags::NoFollowSymlink,
    )
    .unwrap_or_else(|e| panic!("utimensat {}: {e}", path.display()));
}

/// A file of `len` bytes of a pattern (so nothing compresses or dedups), synced to disk.
pub fn write_file(path: &Path, len: usize) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    let mut f = fs::File::create(path).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
}

/// Gives `path` (a link itself, not its target) to `uid:gid`.
pub fn give(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("lchown {}: {e}", path.display()));
}

/// A mount, undone on drop (also when the test fails), and a loop device detached after it.
pub struct MountGuard {
    /// Where it is mounted.
    pub point: PathBuf,
    /// The loop device to detach after unmounting, if any.
    pub loop_dev: Option<String>,
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.point)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Busy (a child still in it): detach it lazily rather than leave it behind.
            let _ = Command::new("umount").arg("-l").arg(&self.point).status();
        }
        if let Some(dev) = &self.loop_dev {
            let _ = Command::new("losetup").args(["-d", dev]).status();
        }
    }
}
