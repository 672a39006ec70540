//! Deduplication and incremental reuse: a small change to a large file adds little, unchanged
//! files are not read, and atimes do not move.

mod common;
#[allow(dead_code)]
mod support;

use common::*;
use std::fs;
use std::os::unix::fs::MetadataExt;
use support::*;

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
