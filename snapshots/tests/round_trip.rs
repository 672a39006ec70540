//! The round trip: a tree with every kind of entry the backup must keep comes back exactly,
//! hard links, holes, modes, owners and mtimes included.

mod common;
#[allow(dead_code)]
mod support;

use common::*;
use labpool_snapshots::Progress;
use labpool_snapshots::check::check;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use support::*;

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

/// Every path under `root`, each directory's entries before the directory itself.
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
