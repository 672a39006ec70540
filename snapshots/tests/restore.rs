//! Finding and restoring: a deleted file or directory found in the right snapshot and put
//! back, restores that never follow symlinks in the target, and a file restored with the
//! directories above it after its index was lost.

mod common;
#[allow(dead_code)]
mod support;

use common::*;
use labpool_snapshots::browse;
use labpool_snapshots::check::check;
use labpool_snapshots::restore::open_dir_nofollow;
use labpool_snapshots::{Progress, RestoreOptions, SnapshotError};
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use support::*;

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
