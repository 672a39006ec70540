//! btrfs qgroup enforcement on a real file system (a loop-mounted image): `detect` sees btrfs,
//! `apply` makes the user's directory a subvolume owned by them (mode 0700) with the hard
//! limit as its qgroup limit, and the kernel then stops the user's writes past it with
//! EDQUOT. A plain directory already holding data is left as it is and reported as not
//! enforced by the kernel; an empty one becomes a subvolume.
//!
//! Needs root, loop devices, the btrfs module and btrfs-progs (installed with apt-get when
//! missing); without them each test says SKIPPED, and fails in strict mode.

mod common;

use common::*;
use labpool_quotas::Progress;
use labpool_quotas::kernel::{Enforcement, Owner, apply, detect};
use labpool_quotas::limits::Limit;
use labpool_quotas::scan::{ScanOptions, scan};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// A btrfs file system on a loop device, unmounted and detached on drop.
struct LoopBtrfs {
    // Dropped in this order: the mount (and loop device), any mount below it, then the temp
    // dir holding the image.
    guard: MountGuard,
    _below: Option<MountGuard>,
    _tmp: tempfile::TempDir,
}

impl LoopBtrfs {
    fn mount(&self) -> &PathBuf {
        &self.guard.point
    }
}

/// Installs btrfs-progs once if it is missing (one test at a time: apt takes a lock).
fn btrfs_progs() -> Result<(), String> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if have("btrfs") && have("mkfs.btrfs") {
        return Ok(());
    }
    let ok = Command::new("apt-get")
        .args(["install", "-y", "-q", "btrfs-progs"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok && have("btrfs") && have("mkfs.btrfs") {
        Ok(())
    } else {
        Err("btrfs-progs is missing and `apt-get install -y btrfs-progs` failed".into())
    }
}

/// A fresh 300 MiB btrfs, or why there cannot be one here. With `over_tmpfs`, it is mounted
/// over a tmpfs already mounted at the same point.
fn loop_btrfs(over_tmpfs: bool) -> Result<LoopBtrfs, String> {
    if !is_root() {
        return Err("not root: mounting a loop image needs root".into());
    }
    btrfs_progs()?;
    let tmp = tempfile::tempdir().unwrap();
    // The user's writes below need to get through the temp dir to the mount.
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let image = base.join("fs.img");
    fs::File::create(&image)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    sh(Command::new("mkfs.btrfs").arg("-q").arg(&image));
    let out = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&image)
        .output()
        .map_err(|e| format!("losetup: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "no loop device (losetup -f failed: {})",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let point = base.join("mnt");
    fs::create_dir(&point).unwrap();
    let below = over_tmpfs.then(|| {
        sh(Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "labpool-test"])
            .arg(&point));
        MountGuard {
            point: point.clone(),
            loop_dev: None,
        }
    });
    // From here on the guard detaches the loop device, mounted or not.
    let guard = MountGuard {
        point: point.clone(),
        loop_dev: Some(dev.clone()),
    };
    let out = Command::new("mount")
        .args(["-t", "btrfs", &dev])
        .arg(&point)
        .output()
        .map_err(|e| format!("mount: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cannot mount btrfs (no btrfs module?): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(LoopBtrfs {
        guard,
        _below: below,
        _tmp: tmp,
    })
}

fn alice() -> Owner {
    Owner {
        name: "alice".into(),
        uid: 5001,
        gid: 5001,
    }
}

#[test]
fn a_qgroup_limit_stops_the_users_writes() {
    let fs_ = match loop_btrfs(false) {
        Ok(f) => f,
        Err(why) => {
            skipped(&why);
            return;
        }
    };
    let mount = fs_.mount();
    let enf = detect(mount);
    assert_eq!(
        enf,
        Enforcement::Btrfs {
            mount: mount.clone()
        }
    );
    assert!(enf.by_kernel() && enf.describe().contains("btrfs qgroup"));

    let home = mount.join("alice");
    let limit = Limit {
        hard_bytes: Some(32 << 20),
        ..Limit::default()
    };
    let applied = apply(&enf, &home, &alice(), &limit).unwrap();
    assert!(applied.by_kernel, "{applied:?}");
    assert!(applied.note.contains("32M"), "{}", applied.note);
    let m = fs::symlink_metadata(&home).unwrap();
    assert_eq!(m.ino(), 256, "a subvolume's root directory is inode 256");
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (5001, 5001, 0o700));
    // Applying again changes nothing and still succeeds (quotas are on, the subvolume is
    // there).
    assert!(apply(&enf, &home, &alice(), &limit).unwrap().by_kernel);

    // alice writes 64 MiB: the kernel stops her at 32.
    let file = home.join("big.bin");
    let out = Command::new("setpriv")
        .args(["--reuid=5001", "--regid=5001", "--clear-groups"])
        .args(["dd", "if=/dev/zero", "bs=1M", "count=64", "conv=fsync"])
        .arg(format!("of={}", file.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "64 MiB fit under 32 MiB: {stderr}");
    assert!(stderr.contains("Disk quota exceeded"), "{stderr}");
    let written = fs::metadata(&file).unwrap();
    assert_eq!(written.uid(), 5001);
    assert!(
        written.len() <= (32 << 20) + (1 << 20),
        "{} bytes got past a 32 MiB limit",
        written.len()
    );
    assert!(written.len() >= 16 << 20, "only {} bytes", written.len());

    // The scanner goes into the subvolume (another device number, but no mount) and agrees
    // with du, which does too without -x.
    let report = scan(mount, &ScanOptions::default(), &Progress::default()).unwrap();
    assert!(
        report.mounts_skipped.is_empty(),
        "{:?}",
        report.mounts_skipped
    );
    assert_eq!(report.users[&5001].files, 2, "{:?}", report.users);
    let dir_size = fs::metadata(&home).unwrap().len();
    assert_eq!(report.users[&5001].apparent, dir_size + written.len());
    assert!(report.users[&5001].bytes >= written.len());
    let du: u64 = sh(Command::new("du").args(["-s", "-B1"]).arg(mount))
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(report.total().bytes, du);
}

#[test]
fn detect_sees_btrfs_mounted_over_another_file_system() {
    let fs_ = match loop_btrfs(true) {
        Ok(f) => f,
        Err(why) => {
            skipped(&why);
            return;
        }
    };
    // The tmpfs below is hidden: limits here are btrfs's.
    let enf = detect(fs_.mount());
    assert_eq!(
        enf,
        Enforcement::Btrfs {
            mount: fs_.mount().clone()
        }
    );
}

#[test]
fn a_plain_directory_with_data_is_not_converted_but_an_empty_one_is() {
    let fs_ = match loop_btrfs(false) {
        Ok(f) => f,
        Err(why) => {
            skipped(&why);
            return;
        }
    };
    let mount = fs_.mount();
    let enf = detect(mount);
    assert!(matches!(enf, Enforcement::Btrfs { .. }), "{enf:?}");
    let limit = Limit {
        hard_bytes: Some(8 << 20),
        ..Limit::default()
    };

    let bob = mount.join("bob");
    write_file(&bob.join("thesis.tex"), 1000);
    let applied = apply(
        &enf,
        &bob,
        &Owner {
            name: "bob".into(),
            uid: 5002,
            gid: 5002,
        },
        &limit,
    )
    .unwrap();
    assert!(!applied.by_kernel, "{applied:?}");
    assert!(applied.note.contains("plain directory"), "{}", applied.note);
    assert_ne!(fs::metadata(&bob).unwrap().ino(), 256);
    assert_eq!(fs::read(bob.join("thesis.tex")).unwrap().len(), 1000);

    // An empty directory becomes a subvolume, keeping its mode.
    let carol = mount.join("carol");
    fs::create_dir(&carol).unwrap();
    fs::set_permissions(&carol, fs::Permissions::from_mode(0o750)).unwrap();
    let applied = apply(
        &enf,
        &carol,
        &Owner {
            name: "carol".into(),
            uid: 5003,
            gid: 5003,
        },
        &limit,
    )
    .unwrap();
    assert!(applied.by_kernel, "{applied:?}");
    let m = fs::symlink_metadata(&carol).unwrap();
    assert_eq!(m.ino(), 256);
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (5003, 5003, 0o750));

    // A file where the user's directory belongs is an error.
    write_file(&mount.join("dave"), 1);
    let e = apply(&enf, &mount.join("dave"), &alice(), &limit).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
}
