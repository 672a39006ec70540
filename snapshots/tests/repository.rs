//! The snapshot repository end to end, in-process: round trip, find and restore, dedup,
//! incremental reuse, corruption, retention, prune.

mod common;

use common::*;
use labpool_snapshots::browse;
use labpool_snapshots::check::check;
use labpool_snapshots::prune::{forget, prune};
use labpool_snapshots::restore::{open_dir_nofollow, restore_node};
use labpool_snapshots::{Policy, Progress, RestoreOptions, SnapshotError};
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

/// Restores `node` into the existing directory `dir`.
fn into(
    repo: &labpool_snapshots::Repository,
    node: &labpool_snapshots::tree::Node,
    dir: &Path,
    opts: &RestoreOptions,
) -> labpool_snapshots::Result<labpool_snapshots::RestoreReport> {
    let fd = open_dir_nofollow(dir).unwrap();
    restore_node(repo, node, &fd, dir, opts, &Progress::default())
}

/// A tree with every kind of entry the backup must keep.
fn every_kind(root: &Path) {
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    fs::write(root.join("plain.txt"), b"hello\n").unwrap();
    fs::write(root.join("empty"), b"").unwrap();
    fs::write(root.join("sub/deeper/big.bin"), noise(3 << 20, 7)).unwrap();
    // Sparse: 1 MiB hole, 4 KiB data, 2 MiB hole at the end.
    let mut f = fs::File::create(root.join("sparse.img")).unwrap();
    f.seek(SeekFrom::Start(1 << 20)).unwrap();
    f.write_all(&noise(4096, 3)).unwrap();
    f.set_len(3 << 20).unwrap();
    drop(f);
    symlink("plain.txt", root.join("link-rel")).unwrap();
    symlink("/etc/passwd", root.join("link-abs")).unwrap();
    symlink("nowhere", root.join("link-dangling")).unwrap();
    fs::write(root.join("sub/original"), b"linked content").unwrap();
    fs::hard_link(
        root.join("sub/original"),
        root.join("sub/deeper/second-name"),
    )
    .unwrap();
    fs::hard_link(root.join("sub/original"), root.join("third-name")).unwrap();
    fs::write(root.join("with space & ümlaut"), b"x").unwrap();
    let weird = std::ffi::OsStr::from_bytes(b"bytes-\xff\xfe-not-utf8");
    fs::write(root.join(weird), b"y").unwrap();
    fs::write(root.join("-dash"), b"z").unwrap();
    fs::write(root.join("setuid"), b"s").unwrap();
    fs::set_permissions(root.join("setuid"), fs::Permissions::from_mode(0o4755)).unwrap();
    fs::write(root.join("private"), b"p").unwrap();
    fs::set_permissions(root.join("private"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(root.join("sticky")).unwrap();
    fs::set_permissions(root.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(root.join("readonly"), b"r").unwrap();
    fs::set_permissions(root.join("readonly"), fs::Permissions::from_mode(0o444)).unwrap();
    nix::unistd::mkfifo(
        &root.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    if is_root() {
        nix::sys::stat::mknod(
            &root.join("null-dev"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        std::os::unix::fs::lchown(root.join("private"), Some(4242), Some(4343)).unwrap();
        std::os::unix::fs::lchown(root.join("link-rel"), Some(4242), Some(4242)).unwrap();
        std::os::unix::fs::lchown(root.join("sub/deeper"), Some(4343), Some(4343)).unwrap();
    }
    // Distinct, old mtimes, with nanoseconds, directories last (children change them).
    let mut n = 0i64;
    let mut all: Vec<_> = walk(root);
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in all {
        n += 1;
        let t = nix::sys::time::TimeSpec::new(1_600_000_000 + n * 1000, 123_456_789 + n);
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &p,
            &t,
            &t,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }
}

use std::os::unix::ffi::OsStrExt;

fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

fn restore_all(
    repo: &labpool_snapshots::Repository,
    snap: &labpool_snapshots::Snapshot,
    target: &Path,
) {
    fs::create_dir_all(target).unwrap();
    let opts = RestoreOptions {
        set_owner: is_root(),
        ..Default::default()
    };
    let r = into(repo, &snap.root, target, &opts).unwrap();
    assert!(
        r.failed.iter().all(|f| f.contains("socket")),
        "{:?}",
        r.failed
    );
}

#[test]
fn round_trip_keeps_every_kind_of_entry_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("data");
    every_kind(&src);
    let repo = repo(tmp.path());
    let s = backup(&repo, "data", &src, "2026-11-01T03:00:00Z");
    assert_eq!(s.errors, 0);
    let target = tmp.path().join("restored");
    restore_all(&repo, &s, &target);
    let before = describe(&src);
    let after = describe(&target.join("data"));
    assert_eq!(before, after);
    assert!(before.len() >= 20, "{before:?}");
    // Hard links stay hard links.
    let a = fs::metadata(target.join("data/sub/original")).unwrap();
    let b = fs::metadata(target.join("data/third-name")).unwrap();
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.nlink(), 3);
    // Sparse stays sparse: 4 KiB of data, not 3 MiB of blocks.
    let sparse = fs::metadata(target.join("data/sparse.img")).unwrap();
    assert_eq!(sparse.len(), 3 << 20);
    assert!(
        sparse.blocks() * 512 < 256 << 10,
        "{} blocks",
        sparse.blocks()
    );
    // The repository passes check, structure and data.
    let c = check(&repo, true, &Progress::default()).unwrap();
    assert!(c.ok(), "{c:?}");
}

#[test]
fn a_deleted_file_and_directory_are_found_and_restored_from_the_right_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    fs::create_dir_all(home.join("alice/thesis/figs")).unwrap();
    fs::write(home.join("alice/thesis/main.tex"), b"v1").unwrap();
    fs::write(home.join("alice/thesis/figs/a.png"), noise(50_000, 1)).unwrap();
    fs::write(home.join("alice/notes.md"), b"monday").unwrap();
    let repo = repo(tmp.path());
    let mon = backup(&repo, "home", &home, "2026-11-02T03:00:00Z");
    fs::write(home.join("alice/notes.md"), b"tuesday, longer").unwrap();
    let tue = backup(&repo, "home", &home, "2026-11-03T03:00:00Z");
    fs::remove_file(home.join("alice/notes.md")).unwrap();
    fs::remove_dir_all(home.join("alice/thesis")).unwrap();
    let wed = backup(&repo, "home", &home, "2026-11-04T03:00:00Z");

    let f = browse::find(&repo, &home.join("alice/notes.md"), None).unwrap();
    assert_eq!(f.sightings.len(), 3);
    assert_eq!(f.last_seen.as_deref(), Some(tue.id.as_str()));
    assert_eq!(f.gone_in.as_deref(), Some(wed.id.as_str()));
    assert_eq!(f.sightings[0].size, Some(6));

    // Monday's version of the note, and the whole thesis directory, back in place.
    let node = browse::lookup(&repo, &mon, &home.join("alice/notes.md"), None)
        .unwrap()
        .unwrap();
    let opts = RestoreOptions::default();
    into(&repo, &node, &home.join("alice"), &opts).unwrap();
    assert_eq!(fs::read(home.join("alice/notes.md")).unwrap(), b"monday");
    let thesis = browse::lookup(&repo, &tue, &home.join("alice/thesis"), None)
        .unwrap()
        .unwrap();
    into(&repo, &thesis, &home.join("alice"), &opts).unwrap();
    assert_eq!(fs::read(home.join("alice/thesis/main.tex")).unwrap(), b"v1");
    assert_eq!(
        fs::read(home.join("alice/thesis/figs/a.png")).unwrap(),
        noise(50_000, 1)
    );

    // Restoring again over what is there is refused, and changes nothing.
    let err = into(&repo, &node, &home.join("alice"), &opts).unwrap_err();
    assert!(matches!(err, SnapshotError::TargetExists { .. }), "{err}");
    assert!(err.to_string().contains("--target"), "{err}");
    // With --overwrite the file is replaced by Tuesday's.
    let tue_node = browse::lookup(&repo, &tue, &home.join("alice/notes.md"), None)
        .unwrap()
        .unwrap();
    let over = RestoreOptions {
        overwrite: true,
        ..Default::default()
    };
    into(&repo, &tue_node, &home.join("alice"), &over).unwrap();
    assert_eq!(
        fs::read(home.join("alice/notes.md")).unwrap(),
        b"tuesday, longer"
    );

    // diff names what changed.
    let d = browse::diff(&repo, &mon, &wed, None).unwrap();
    let removed: Vec<_> = d
        .iter()
        .filter(|c| c.what == '-')
        .map(|c| c.path.clone())
        .collect();
    assert!(
        removed.iter().any(|p| p.ends_with("alice/notes.md")),
        "{d:?}"
    );
    assert!(
        removed
            .iter()
            .any(|p| p.ends_with("alice/thesis/figs/a.png")),
        "{d:?}"
    );
    let d = browse::diff(&repo, &mon, &tue, None).unwrap();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].what, d[0].old_size, d[0].new_size),
        ('M', Some(6), Some(15))
    );
}

#[test]
fn a_4k_insertion_in_a_200m_file_adds_under_5m_and_unchanged_files_are_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    fs::create_dir(&src).unwrap();
    let mut data = noise(200 << 20, 11);
    fs::write(src.join("model.pt"), &data).unwrap();
    fs::write(src.join("untouched.txt"), b"same every night").unwrap();
    let repo = repo(tmp.path());
    let first = backup(&repo, "ckpt", &src, "2026-11-01T03:00:00Z");
    assert!(first.added_bytes > 200 << 20);

    // An old atime on the untouched file: a backup that read it (without O_NOATIME) would move it.
    let old = nix::sys::time::TimeSpec::new(1_500_000_000, 0);
    let keep_m = fs::metadata(src.join("untouched.txt")).unwrap();
    let m = nix::sys::time::TimeSpec::new(keep_m.mtime(), keep_m.mtime_nsec());
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &src.join("untouched.txt"),
        &old,
        &m,
        nix::sys::stat::UtimensatFlags::FollowSymlink,
    )
    .unwrap();

    let mid = 100 << 20;
    let insert = noise(4096, 99);
    data.splice(mid..mid, insert);
    fs::write(src.join("model.pt"), &data).unwrap();
    let size_before = dir_size(&repo.root().join("packs"));
    let second = backup(&repo, "ckpt", &src, "2026-11-02T03:00:00Z");
    let grew = dir_size(&repo.root().join("packs")) - size_before;
    assert!(grew < 5 << 20, "the repository grew by {grew} bytes");
    assert_eq!(second.added_bytes, grew);
    assert_eq!(second.parent.as_deref(), Some(first.id.as_str()));
    assert_eq!(
        fs::metadata(src.join("untouched.txt")).unwrap().atime(),
        1_500_000_000
    );

    // A no-change backup adds one small pack at most (the root listing is unchanged, so nothing).
    let third = backup(&repo, "ckpt", &src, "2026-11-03T03:00:00Z");
    assert_eq!(third.added_bytes, 0);
    assert_eq!(third.tree, second.tree);

    // The O_NOATIME read: a changed file is read, yet its atime does not move.
    fs::write(src.join("untouched.txt"), b"changed now").unwrap();
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &src.join("untouched.txt"),
        &old,
        &nix::sys::time::TimeSpec::new(1_700_000_000, 0),
        nix::sys::stat::UtimensatFlags::FollowSymlink,
    )
    .unwrap();
    let fourth = backup(&repo, "ckpt", &src, "2026-11-04T03:00:00Z");
    assert!(fourth.added_bytes > 0);
    assert_eq!(
        fs::metadata(src.join("untouched.txt")).unwrap().atime(),
        1_500_000_000
    );

    let target = tmp.path().join("out");
    restore_all(&repo, &second, &target);
    assert!(fs::read(target.join("ckpt/model.pt")).unwrap() == data);
}

fn dir_size(p: &Path) -> u64 {
    let mut n = 0;
    for e in fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_size(&e.path())
        } else {
            m.len()
        };
    }
    n
}

#[test]
fn a_flipped_byte_is_traced_to_its_files_and_only_those_fail_to_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("d");
    fs::create_dir(&src).unwrap();
    // Two files in separate packs: the first fills a pack by itself.
    fs::write(src.join("a-victim.bin"), noise(40 << 20, 5)).unwrap();
    fs::write(src.join("b-fine.txt"), b"fine").unwrap();
    let repo = repo(tmp.path());
    let s = backup(&repo, "d", &src, "2026-11-01T03:00:00Z");
    let node = browse::lookup(&repo, &s, &src.join("a-victim.bin"), None)
        .unwrap()
        .unwrap();
    let (pack, entry) = repo.index().lookup(&node.content[3]).unwrap().unwrap();
    let path = labpool_snapshots::pack::pack_path(&repo.packs_dir(), &pack);
    let mut bytes = fs::read(&path).unwrap();
    bytes[entry.offset as usize + 100] ^= 0x40;
    fs::write(&path, bytes).unwrap();

    let quick = check(&repo, false, &Progress::default()).unwrap();
    assert!(
        quick.ok(),
        "a structural check does not read data: {quick:?}"
    );
    let full = check(&repo, true, &Progress::default()).unwrap();
    assert!(!full.ok());
    assert_eq!(
        full.damaged_files,
        vec![format!("{} {}", s.id, src.join("a-victim.bin").display())]
    );
    assert!(
        full.errors.iter().any(|e| e.contains("damaged")),
        "{:?}",
        full.errors
    );

    let target = tmp.path().join("t");
    fs::create_dir(&target).unwrap();
    let fd = open_dir_nofollow(&target).unwrap();
    let fine = browse::lookup(&repo, &s, &src.join("b-fine.txt"), None)
        .unwrap()
        .unwrap();
    let r = restore_node(
        &repo,
        &fine,
        &fd,
        &target,
        &RestoreOptions::default(),
        &Progress::default(),
    )
    .unwrap();
    assert!(r.failed.is_empty());
    assert_eq!(fs::read(target.join("b-fine.txt")).unwrap(), b"fine");
    let r = restore_node(
        &repo,
        &node,
        &fd,
        &target,
        &RestoreOptions::default(),
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(r.failed.len(), 1, "{r:?}");
    assert!(r.failed[0].contains("does not match its hash"), "{r:?}");
    assert!(
        !target.join("a-victim.bin").exists(),
        "no half-restored file is left"
    );
}

#[test]
fn forty_nightly_snapshots_keep_exactly_the_policy_set_and_prune_frees_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("d");
    fs::create_dir(&src).unwrap();
    let repo = repo(tmp.path());
    let start: chrono::DateTime<chrono::Utc> = "2026-10-01T03:00:00Z".parse().unwrap();
    let mut ids = Vec::new();
    for day in 0..40 {
        fs::write(src.join(format!("day-{day}.bin")), noise(100_000, day)).unwrap();
        if day > 0 {
            fs::remove_file(src.join(format!("day-{}.bin", day - 1))).unwrap();
        }
        let t = start + chrono::Duration::days(day as i64);
        ids.push(backup(&repo, "d", &src, &t.to_rfc3339()).id);
    }
    let policy = Policy {
        keep_daily: 7,
        keep_weekly: 4,
        ..Default::default()
    };
    let utc = chrono::FixedOffset::east_opt(0).unwrap();
    let dry = forget(&repo, &policy, utc, true).unwrap();
    assert_eq!(
        repo.snapshots().unwrap().len(),
        40,
        "a dry run forgets nothing"
    );
    let verdicts = forget(&repo, &policy, utc, false).unwrap();
    assert_eq!(dry.len(), verdicts.len());
    // Days 33–39 (Nov 3–9) daily; weekly: the newest of the 4 newest ISO weeks. Nov 9 2026 is a
    // Monday, so its week's newest is day 39; the weeks before end on Sundays Nov 8, Nov 1,
    // Oct 25: days 38, 31, 24.
    let mut expect: Vec<usize> = (33..40).collect();
    expect.extend([31, 24]);
    expect.sort();
    let kept: Vec<String> = repo
        .snapshots()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    let expect_ids: Vec<String> = expect.iter().map(|&d| ids[d].clone()).collect();
    assert_eq!(kept, expect_ids);
    let why38 = verdicts.iter().find(|v| v.snapshot.id == ids[38]).unwrap();
    assert_eq!(why38.reasons, vec!["daily", "weekly"]);

    let before = dir_size(&repo.root().join("packs"));
    let p = prune(&repo, false, &Progress::default()).unwrap();
    let after = dir_size(&repo.root().join("packs"));
    assert!(p.packs_deleted + p.packs_rewritten > 0, "{p:?}");
    assert!(
        after < before / 2,
        "prune freed too little: {before} -> {after}"
    );
    assert!(check(&repo, true, &Progress::default()).unwrap().ok());
    let target = tmp.path().join("t");
    restore_all(&repo, &repo.select(&ids[24]).unwrap(), &target);
    assert_eq!(
        fs::read(target.join("d/day-24.bin")).unwrap(),
        noise(100_000, 24)
    );
    // Nothing is left to prune.
    let again = prune(&repo, false, &Progress::default()).unwrap();
    assert_eq!(again.packs_deleted + again.packs_rewritten, 0, "{again:?}");
}

#[test]
fn a_member_sees_and_restores_only_what_they_owned() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to give files to two owners");
        assert!(
            std::env::var_os("LABPOOL_TEST_STRICT").is_none(),
            "strict mode needs root"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    for (user, uid) in [("a", 5001u32), ("b", 5002)] {
        fs::create_dir_all(home.join(user)).unwrap();
        fs::write(home.join(user).join("secret"), user.as_bytes()).unwrap();
        for p in [home.join(user), home.join(user).join("secret")] {
            std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
        }
    }
    // A file of b's inside a's directory stays b's.
    fs::write(home.join("a/from-b"), b"b").unwrap();
    std::os::unix::fs::chown(home.join("a/from-b"), Some(5002), Some(5002)).unwrap();
    // A setgid file of a's in a project group (5999) that a has since left.
    fs::write(home.join("a/tool"), b"#!/bin/sh\n").unwrap();
    std::os::unix::fs::chown(home.join("a/tool"), Some(5001), Some(5999)).unwrap();
    fs::set_permissions(home.join("a/tool"), fs::Permissions::from_mode(0o2755)).unwrap();
    // A root-owned shared directory with a file of a's in it.
    fs::create_dir(home.join("shared")).unwrap();
    fs::write(home.join("shared/a-notes"), b"v1").unwrap();
    std::os::unix::fs::chown(home.join("shared/a-notes"), Some(5001), Some(5001)).unwrap();
    let repo = repo(tmp.path());
    let s = backup(&repo, "home", &home, "2026-11-01T03:00:00Z");
    fs::write(home.join("shared/a-notes"), b"version 2").unwrap();
    fs::write(home.join("shared/root-file"), b"r").unwrap();
    let s2 = backup(&repo, "home", &home, "2026-11-02T03:00:00Z");
    // a sees the change to her file inside the root-owned directory, and nothing else.
    let d = browse::diff(&repo, &s, &s2, Some(5001)).unwrap();
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].path.ends_with("shared/a-notes") && d[0].what == 'M',
        "{d:?}"
    );
    assert_eq!(browse::diff(&repo, &s, &s2, None).unwrap().len(), 2);

    let top = browse::ls(&repo, &s, &home, false, Some(5001)).unwrap();
    assert_eq!(top.len(), 1, "{top:?}");
    assert!(top[0].path.ends_with("/a"));
    let mine = browse::ls(&repo, &s, &home.join("a"), true, Some(5001)).unwrap();
    assert_eq!(mine.len(), 2, "{mine:?}");
    // b's directory answers as a path that does not exist does: nothing is learnt from it.
    let theirs = browse::ls(&repo, &s, &home.join("b"), true, Some(5001)).unwrap_err();
    let nothing = browse::ls(&repo, &s, &home.join("nope"), true, Some(5001)).unwrap_err();
    assert!(
        matches!(theirs, SnapshotError::NotInSnapshot { .. }),
        "{theirs}"
    );
    assert_eq!(
        theirs.to_string().replace("/b ", "/X "),
        nothing.to_string().replace("/nope ", "/X ")
    );
    assert!(
        browse::lookup(&repo, &s, &home.join("b/secret"), Some(5001))
            .unwrap()
            .is_none()
    );
    let f = browse::find(&repo, &home.join("b/secret"), Some(5001)).unwrap();
    assert!(f.last_seen.is_none());

    let target = tmp.path().join("restore-a");
    fs::create_dir(&target).unwrap();
    let b_node = browse::lookup(&repo, &s, &home.join("b"), None)
        .unwrap()
        .unwrap();
    let member = RestoreOptions {
        only_uid: Some(5001),
        set_owner: true,
        member_groups: Some(vec![5001]),
        ..Default::default()
    };
    let err = into(&repo, &b_node, &target, &member).unwrap_err();
    assert!(
        matches!(
            err,
            SnapshotError::NotYours {
                owner: 5002,
                caller: 5001,
                ..
            }
        ),
        "{err}"
    );
    let a_node = browse::lookup(&repo, &s, &home.join("a"), None)
        .unwrap()
        .unwrap();
    let r = into(&repo, &a_node, &target, &member).unwrap();
    assert_eq!((r.files, r.skipped_not_owned), (2, 1));
    assert_eq!(fs::metadata(target.join("a/secret")).unwrap().uid(), 5001);
    assert!(!target.join("a/from-b").exists());
    // The group she left is not handed back, nor its setgid bit.
    let tool = fs::metadata(target.join("a/tool")).unwrap();
    assert_eq!(
        (tool.uid(), tool.gid(), tool.mode() & 0o7777),
        (5001, 5001, 0o755)
    );

    // With --overwrite, a member's restore does not merge into someone else's directory.
    let other = tmp.path().join("restore-b");
    fs::create_dir_all(other.join("a")).unwrap();
    std::os::unix::fs::chown(other.join("a"), Some(5002), Some(5002)).unwrap();
    let over = RestoreOptions {
        overwrite: true,
        ..member.clone()
    };
    let r = into(&repo, &a_node, &other, &over).unwrap();
    assert_eq!(r.failed.len(), 1, "{r:?}");
    assert!(r.failed[0].contains("a directory of uid 5002"), "{r:?}");
    assert_eq!(fs::read_dir(other.join("a")).unwrap().count(), 0);
}

#[test]
fn restores_never_follow_symlinks_in_the_target() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("d");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("victim"), b"from the snapshot").unwrap();
    let repo = repo(tmp.path());
    let s = backup(&repo, "d", &src, "2026-11-01T03:00:00Z");
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("precious"), b"keep me").unwrap();

    // A target path through a symlink is refused.
    symlink(&outside, tmp.path().join("via-link")).unwrap();
    let err = open_dir_nofollow(&tmp.path().join("via-link")).unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    let err = open_dir_nofollow(&tmp.path().join("d/../outside")).unwrap_err();
    assert!(err.to_string().contains(".."), "{err}");

    // A symlink planted where the file goes is replaced with --overwrite, never written through.
    let target = tmp.path().join("t");
    fs::create_dir(&target).unwrap();
    symlink(outside.join("precious"), target.join("victim")).unwrap();
    let node = browse::lookup(&repo, &s, &src.join("victim"), None)
        .unwrap()
        .unwrap();
    let over = RestoreOptions {
        overwrite: true,
        ..Default::default()
    };
    into(&repo, &node, &target, &over).unwrap();
    assert_eq!(fs::read(outside.join("precious")).unwrap(), b"keep me");
    assert!(
        fs::symlink_metadata(target.join("victim"))
            .unwrap()
            .is_file()
    );
    assert_eq!(
        fs::read(target.join("victim")).unwrap(),
        b"from the snapshot"
    );
}

#[test]
fn a_file_whose_directories_are_gone_comes_back_with_them_and_a_lost_index_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("d");
    fs::create_dir_all(src.join("a/b")).unwrap();
    fs::write(src.join("a/b/c.txt"), b"deep").unwrap();
    fs::set_permissions(src.join("a/b"), fs::Permissions::from_mode(0o750)).unwrap();
    let repo_dir = tmp.path().join("repo");
    let s = {
        let repo = repo(tmp.path());
        backup(&repo, "d", &src, "2026-11-01T03:00:00Z")
    };
    fs::remove_dir_all(src.join("a")).unwrap();

    // The index file is lost: rebuilt from the packs and the records alone.
    fs::remove_file(repo_dir.join("index.sqlite")).unwrap();
    let (repo, done) = labpool_snapshots::Repository::open_rebuilding_index(&repo_dir).unwrap();
    assert_eq!(done.records_fixed, 1);
    assert!(check(&repo, true, &Progress::default()).unwrap().ok());

    let path = src.join("a/b/c.txt");
    let (snap, node) =
        labpool_snapshots::select::pick(&repo, &path, &labpool_snapshots::select::At::Latest, None)
            .unwrap();
    assert_eq!(snap.id, s.id);
    labpool_snapshots::restore::restore_to(
        &repo,
        &snap,
        &node,
        &path,
        None,
        &RestoreOptions::default(),
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"deep");
    assert_eq!(
        fs::metadata(src.join("a/b")).unwrap().permissions().mode() & 0o777,
        0o750
    );
}

#[test]
fn prune_leaves_a_pack_with_damaged_live_data_alone_and_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("d");
    fs::create_dir(&src).unwrap();
    // Both files fit in one pack; the second is dropped later, so the pack is half garbage.
    fs::write(src.join("keep.bin"), noise(12 << 20, 1)).unwrap();
    fs::write(src.join("drop.bin"), noise(12 << 20, 2)).unwrap();
    let repo = repo(tmp.path());
    backup(&repo, "d", &src, "2026-11-01T03:00:00Z");
    fs::remove_file(src.join("drop.bin")).unwrap();
    let s2 = backup(&repo, "d", &src, "2026-11-02T03:00:00Z");
    let node = browse::lookup(&repo, &s2, &src.join("keep.bin"), None)
        .unwrap()
        .unwrap();
    let (pack, entry) = repo.index().lookup(&node.content[1]).unwrap().unwrap();
    let path = labpool_snapshots::pack::pack_path(&repo.packs_dir(), &pack);
    let mut bytes = fs::read(&path).unwrap();
    bytes[entry.offset as usize + 7] ^= 1;
    fs::write(&path, bytes).unwrap();
    let keep_last = Policy {
        keep_last: 1,
        ..Default::default()
    };
    forget(
        &repo,
        &keep_last,
        chrono::FixedOffset::east_opt(0).unwrap(),
        false,
    )
    .unwrap();
    let p = prune(&repo, false, &Progress::default()).unwrap();
    assert_eq!(p.damaged_packs, vec![pack.clone()], "{p:?}");
    assert!(path.exists(), "the damaged pack is kept");
    let c = check(&repo, true, &Progress::default()).unwrap();
    assert_eq!(
        c.damaged_files,
        vec![format!("{} {}", s2.id, src.join("keep.bin").display())]
    );
}
