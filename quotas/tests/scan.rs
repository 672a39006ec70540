//! The usage scanner agrees with `du -x` and `find -xdev` on a real tree: varied file sizes, a
//! file with three hard links (counted once), a sparse file (allocated far below apparent),
//! symlinks (counted as links, never followed), empty directories, two owners, and a tmpfs
//! mounted inside the tree (never entered, not counted, reported as skipped).

mod common;

use common::*;
use labpool_quotas::Progress;
use labpool_quotas::scan::{ScanOptions, scan};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::Path;
use std::process::Command;

/// The first field of a `du` line, as a number.
fn du(args: &[&str], root: &Path) -> u64 {
    let out = sh(Command::new("du").args(args).arg(root));
    out.split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("du printed {out:?}"))
}

/// Lines `find ROOT -xdev [printf]` prints.
fn find_lines(root: &Path, printf: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new("find");
    cmd.arg(root).arg("-xdev");
    if let Some(p) = printf {
        cmd.args(["-printf", p]);
    }
    sh(&mut cmd).lines().map(str::to_string).collect()
}

/// What one owner should hold: apparent bytes and entries, added up as the tree is made.
#[derive(Default, Debug)]
struct Expect {
    apparent: u64,
    files: u64,
}

#[test]
fn scan_totals_match_du_and_find_and_split_by_owner() {
    let root_user = is_root();
    if !root_user {
        skipped(
            "not root: the nested tmpfs mount and the two owners are left out of this scan test",
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir(&tree).unwrap();
    let me = nix::unistd::geteuid().as_raw();
    let (alice, bob) = if root_user { (5001, 5002) } else { (me, me) };
    let mut expect: BTreeMap<u32, Expect> = BTreeMap::new();
    // Records an entry of `uid` (already made at `path`) and gives it to them.
    let mut own = |path: &Path, uid: u32| {
        if root_user {
            give(path, uid, uid);
        }
        let m = fs::symlink_metadata(path).unwrap();
        let e = expect.entry(uid).or_default();
        e.apparent += m.size();
        e.files += 1;
    };
    own(&tree, fs::metadata(&tree).unwrap().uid());

    // alice: real data in results/, small notes, an empty directory, a sparse image, a
    // three-link file, a link to a directory.
    let a = tree.join("alice");
    for d in ["", "results", "notes", "notes/empty"] {
        fs::create_dir_all(a.join(d)).unwrap();
        own(&a.join(d), alice);
    }
    for (name, len) in [
        ("results/r1.bin", 3 << 20),
        ("results/r2.bin", (1 << 20) + 123),
        ("notes/n1.txt", 10),
        ("notes/n2.txt", 5000),
        ("notes/zero.txt", 0),
    ] {
        write_file(&a.join(name), len);
        own(&a.join(name), alice);
    }
    let sparse = a.join("sparse.img");
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = fs::File::create(&sparse).unwrap();
        f.set_len(100 << 20).unwrap();
        f.seek(SeekFrom::Start(50 << 20)).unwrap();
        f.write_all(&[7u8; 8192]).unwrap();
        f.sync_all().unwrap();
    }
    own(&sparse, alice);
    write_file(&a.join("linked.bin"), 300 << 10);
    own(&a.join("linked.bin"), alice);
    // Two more names for the same inode: neither adds an entry or a byte.
    fs::hard_link(a.join("linked.bin"), a.join("notes/linked-2")).unwrap();
    fs::hard_link(a.join("linked.bin"), tree.join("linked-3")).unwrap();
    assert_eq!(fs::metadata(a.join("linked.bin")).unwrap().nlink(), 3);
    symlink("results", a.join("link-to-results")).unwrap();
    own(&a.join("link-to-results"), alice);

    // bob: a file, a deep file, a dangling link, an empty directory.
    let b = tree.join("bob");
    for d in ["", "deep", "deep/er", "deep/er/est", "empty"] {
        fs::create_dir_all(b.join(d)).unwrap();
        own(&b.join(d), bob);
    }
    for (name, len) in [("data.bin", (2 << 20) + 7), ("deep/er/est/f.bin", 64 << 10)] {
        write_file(&b.join(name), len);
        own(&b.join(name), bob);
    }
    symlink("/nonexistent/target", b.join("dangling")).unwrap();
    own(&b.join("dangling"), bob);

    // A tmpfs on alice/mnt with 2 MiB in it: neither du -x nor the scanner count any of it.
    let mnt = a.join("mnt");
    let _mounted = if root_user {
        fs::create_dir(&mnt).unwrap();
        sh(Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m,mode=0755", "labpool-test"])
            .arg(&mnt));
        let guard = MountGuard {
            point: mnt.clone(),
            loop_dev: None,
        };
        write_file(&mnt.join("hidden.bin"), 2 << 20);
        fs::create_dir(mnt.join("sub")).unwrap();
        write_file(&mnt.join("sub/more.bin"), 1000);
        give(&mnt, alice, alice);
        Some(guard)
    } else {
        None
    };
    nix::unistd::sync();

    let progress = Progress::default();
    let opts = ScanOptions {
        threads: 4,
        top_depth: 3,
        top_n: 10,
    };
    let report = scan(&tree, &opts, &progress).unwrap();
    let total = report.total();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.error_count, 0);

    // Bytes: du -x counts each inode once, follows no link and stops at the mount.
    assert_eq!(total.bytes, du(&["-x", "-s", "-B1"], &tree), "allocated");
    assert_eq!(
        total.apparent,
        du(&["-x", "-s", "-B1", "--apparent-size"], &tree),
        "apparent"
    );
    // Entries: find -xdev prints every name, the mount point too (it stops below it). The
    // scanner counts inodes, as a file-count quota does, and leaves the mount point out as
    // du -x does. So: the distinct (device, inode) pairs find prints, less the mount point.
    let names = find_lines(&tree, None).len() as u64;
    let mut inodes = find_lines(&tree, Some("%D:%i\n"));
    inodes.sort();
    inodes.dedup();
    let mount_points = u64::from(root_user);
    assert_eq!(total.files, inodes.len() as u64 - mount_points, "entries");
    // ... which is every name but the mount point and the two extra hard links.
    assert_eq!(total.files, names - mount_points - 2);
    // The progress counters saw the same.
    assert_eq!(Progress::get(&progress.entries), total.files);
    assert_eq!(Progress::get(&progress.bytes), total.bytes);

    // Per owner: apparent sizes and entries as made (the hard-linked file once, the link as
    // its target's length, the sparse file at its full length).
    for (uid, e) in &expect {
        let u = report
            .users
            .get(uid)
            .unwrap_or_else(|| panic!("uid {uid} missing: {:?}", report.users));
        assert_eq!((u.apparent, u.files), (e.apparent, e.files), "uid {uid}");
    }
    assert_eq!(report.users.len(), expect.len(), "{:?}", report.users);
    // The sparse file is 100 MiB apparent but only a few KiB allocated: alice holds about the
    // 4.3 MiB of real data, not 100 MiB.
    let ua = report.users[&alice];
    assert!(ua.apparent > 100 << 20, "{ua:?}");
    if root_user {
        assert!(ua.bytes > 4 << 20 && ua.bytes < 6 << 20, "{ua:?}");
        assert_eq!(report.mounts_skipped, vec![fs::canonicalize(&mnt).unwrap()]);
        // Biggest first: all of alice, then her results (4 MiB) before her notes.
        let canon = fs::canonicalize(&tree).unwrap();
        let top_a: Vec<_> = report.top[&alice].iter().map(|t| t.path.clone()).collect();
        assert_eq!(top_a[0], canon.join("alice"), "{top_a:?}");
        assert_eq!(top_a[1], canon.join("alice/results"), "{top_a:?}");
        assert!(report.top[&alice][1].bytes >= 4 << 20);
        assert!(!top_a.iter().any(|p| p.starts_with(&mnt)), "{top_a:?}");
        // bob's deep file is rolled up into each ancestor down to the top depth.
        let top_b = &report.top[&bob];
        assert_eq!(top_b[0].path, canon.join("bob"));
        let deep = top_b
            .iter()
            .find(|t| t.path == canon.join("bob/deep/er"))
            .unwrap_or_else(|| panic!("{top_b:?}"));
        assert!(deep.bytes >= 64 << 10, "{deep:?}");
        assert!(
            !top_b
                .iter()
                .any(|t| t.path == canon.join("bob/deep/er/est"))
        );
    } else {
        assert!(ua.bytes > 4 << 20 && ua.bytes < 20 << 20, "{ua:?}");
        assert!(report.mounts_skipped.is_empty());
    }
}

#[test]
fn a_linked_root_is_resolved_and_a_file_root_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("real")).unwrap();
    symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
    // scan canonicalizes, so a link given as the root resolves to the real directory ...
    let r = scan(
        &tmp.path().join("link"),
        &ScanOptions::default(),
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(r.root, fs::canonicalize(tmp.path().join("real")).unwrap());
    assert_eq!(r.total().files, 1);
    // ... and a file is not a directory.
    write_file(&tmp.path().join("file"), 10);
    let e = scan(
        &tmp.path().join("file"),
        &ScanOptions::default(),
        &Progress::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
}

#[test]
fn a_bind_mount_of_the_same_file_system_is_not_entered() {
    if !is_root() {
        skipped("not root: bind mounts need root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = fs::canonicalize(tmp.path()).unwrap().join("tree");
    write_file(&tree.join("bob/data.bin"), 1 << 20);
    write_file(&tree.join("alice/notes.txt"), 100);
    // Same device as the tree, so only the mount table (where the space is written `\040`)
    // says it is a mount.
    let view = tree.join("alice/view of bob");
    fs::create_dir(&view).unwrap();
    sh(Command::new("mount")
        .arg("--bind")
        .arg(tree.join("bob"))
        .arg(&view));
    let _mounted = MountGuard {
        point: view.clone(),
        loop_dev: None,
    };
    assert_eq!(
        fs::metadata(&view).unwrap().dev(),
        fs::metadata(&tree).unwrap().dev()
    );
    nix::unistd::sync();
    let report = scan(&tree, &ScanOptions::default(), &Progress::default()).unwrap();
    assert_eq!(report.mounts_skipped, vec![view.clone()]);
    // du -x goes into a bind mount of its own file system; leave the view out for it instead.
    let exclude = "--exclude=view of bob";
    let total = report.total();
    assert_eq!(total.bytes, du(&["-x", "-s", "-B1", exclude], &tree));
    assert_eq!(
        total.apparent,
        du(&["-x", "-s", "-B1", "--apparent-size", exclude], &tree)
    );
    // tree, alice, notes.txt, bob, data.bin: bob's file once, not twice.
    assert_eq!(total.files, 5);
}
