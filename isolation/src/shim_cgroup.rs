//! A job's shim leaves the cgroup of the daemon that started it, for a cgroup of its own in
//! each hierarchy an init system tracks services by: every cgroup v2 hierarchy and the v1 one
//! named `systemd`. A supervisor that ends every process in the daemon's cgroup on a stop or a
//! restart (systemd's default `KillMode=control-group`) then ends the daemon only: the shim and
//! its job stay, and the next daemon re-adopts them. The job's own groups (devices, memory) are
//! outside already, under `labpool/` at each hierarchy's root; the shim's go beside them, as
//! `labpool/shim-NAME`, as container runtimes' cgroupfs drivers place theirs.
//!
//! The units keep `KillMode=process` as well (`cli/src/commands/init_systemd.rs`): where a
//! shim cannot move (no root, a read-only hierarchy), a restart still spares it.

use std::io;
use std::path::{Path, PathBuf};

/// Old shim groups looked at, at most, when a new shim sweeps the empty ones away.
const SWEEP_AT_MOST: usize = 4096;

/// Moves this process into `labpool/shim-NAME` in each tracking hierarchy: for each, where it
/// went, or why it could not.
pub fn leave_service_cgroup(name: &str) -> Vec<(PathBuf, io::Result<()>)> {
    if !nix::unistd::geteuid().is_root() {
        return Vec::new();
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    tracking_roots(&mountinfo)
        .into_iter()
        .map(|root| {
            let parent = root.join("labpool");
            let dir = parent.join(format!("shim-{name}"));
            let moved = move_into(&parent, &dir);
            if moved.is_ok() {
                sweep(&parent, &dir);
            }
            (dir, moved)
        })
        .collect()
}

/// The hierarchies services are tracked in, from `/proc/self/mountinfo` text.
fn tracking_roots(mountinfo: &str) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for (mount, fstype, options) in crate::support::mounts(mountinfo) {
        let tracked = match fstype {
            "cgroup2" => true,
            "cgroup" => options.split(',').any(|o| o == "name=systemd"),
            _ => false,
        };
        let root = PathBuf::from(mount);
        if tracked && !roots.contains(&root) {
            roots.push(root);
        }
    }
    roots
}

/// Makes `dir` and joins it. Another shim's sweep may remove the new, still empty group
/// between the two steps: then both are tried again, a few times.
fn move_into(parent: &Path, dir: &Path) -> io::Result<()> {
    let mut tries = 0;
    loop {
        for d in [parent, dir] {
            match std::fs::create_dir(d) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        match std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 5 => tries += 1,
            other => return other,
        }
    }
}

/// Removes the empty groups of shims that have ended (a group with a process is left alone:
/// the kernel refuses to remove it).
fn sweep(parent: &Path, mine: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.take(SWEEP_AT_MOST).flatten() {
        let path = entry.path();
        let is_shim = entry.file_name().to_string_lossy().starts_with("shim-");
        if is_shim && path != mine {
            let _ = std::fs::remove_dir(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_hierarchies_and_the_named_systemd_one_are_tracked() {
        let mountinfo = "\
31 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
34 31 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            tracking_roots(mountinfo),
            [
                PathBuf::from("/sys/fs/cgroup/systemd"),
                PathBuf::from("/sys/fs/cgroup/unified")
            ]
        );
    }
}
