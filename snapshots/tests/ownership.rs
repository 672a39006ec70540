//! A member's view: they see, diff and restore only what they owned, and never merge into
//! someone else's directory.

mod common;
#[allow(dead_code)]
mod support;

use common::*;
use labpool_snapshots::browse;
use labpool_snapshots::{RestoreOptions, SnapshotError};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use support::*;

#[test]
fn a_member_sees_and_restores_only_what_they_owned() {
    if !is_root() {
        labpool_testkit::skip("needs root to give files to two owners");
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
