//! Which mount holds a path when one file system is mounted over another at the same point:
//! the one mounted last, which is the one a process sees. Checked on mountinfo text and on
//! real stacked tmpfs mounts, where the purge must read `noatime` from the top one.

mod common;

use common::*;
use labpool_quotas::Progress;
use labpool_quotas::mounts::{Mounts, atime_kept};
use labpool_quotas::purge::{PurgeContext, PurgePolicy, plan};
use std::fs;
use std::path::Path;
use std::process::Command;

#[test]
fn the_mount_made_last_over_a_point_is_the_one_that_holds_it() {
    let m = Mounts::parse(
        "\
22 1 0:21 / / rw,relatime - overlay overlay rw
40 22 0:40 / /scratch rw,relatime - tmpfs tmpfs rw
41 40 7:0 / /scratch rw,noatime - btrfs /dev/loop0 rw,subvolid=5
42 41 0:42 / /scratch/alice/tmp rw,relatime - tmpfs tmpfs rw
",
    );
    let top = m.containing(Path::new("/scratch/alice/x")).unwrap();
    assert_eq!(top.fstype, "btrfs", "{top:?}");
    assert!(!atime_kept(Some(top)));
    assert_eq!(
        m.containing(Path::new("/scratch/alice/tmp/f"))
            .unwrap()
            .source,
        "tmpfs"
    );
    assert_eq!(m.containing(Path::new("/etc")).unwrap().fstype, "overlay");
}

#[test]
fn the_purge_reads_noatime_from_the_top_of_stacked_mounts() {
    if !is_root() {
        skipped("not root: stacking two tmpfs mounts needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let point = fs::canonicalize(tmp.path()).unwrap().join("scratch");
    fs::create_dir(&point).unwrap();
    let mount = |opts: &str| {
        sh(Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "labpool-test"])
            .arg(&point));
        MountGuard {
            point: point.clone(),
            loop_dev: None,
        }
    };
    // Dropped in reverse: the top mount first.
    let _below = mount("size=1m,relatime");
    let _top = mount("size=1m,noatime");
    let ctx = PurgeContext {
        now: now_secs(),
        protected: vec![],
    };
    let p = plan(&point, &PurgePolicy::default(), &ctx, &Progress::default()).unwrap();
    assert!(!p.atime_counted, "the visible mount is noatime");
    assert!(
        p.atime_note
            .as_deref()
            .is_some_and(|n| n.contains("noatime")),
        "{:?}",
        p.atime_note
    );
}
