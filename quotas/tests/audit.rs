//! The datasets audit on a real tree: it reports exactly the entries a member could write
//! (world-writable, writable by an untrusted group, owned by a member), with the right reasons,
//! and not symlinks or clean files; the fix makes them root's and not writable by members, a
//! second audit finds nothing, and clean entries keep their modes.

mod common;

use common::*;
use labpool_quotas::Progress;
use labpool_quotas::audit::{Trusted, audit};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// (uid, gid, permission bits) of `p`, not following a link.
fn owner_mode(p: &Path) -> (u32, u32, u32) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

#[test]
fn audit_reports_exactly_the_member_writable_entries_and_fixes_them() {
    if !is_root() {
        skipped("not root: the audit tree needs files owned by uid 5001 and group 5001");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap().join("datasets");
    fs::create_dir(&root).unwrap();
    chmod(&root, 0o755);
    // Clean: root's, 0644 and 0755, in a clean directory.
    let clean = root.join("imagenet/train/clean.bin");
    write_file(&clean, 100);
    chmod(&clean, 0o644);
    chmod(&root.join("imagenet"), 0o755);
    chmod(&root.join("imagenet/train"), 0o755);
    // A group-writable file of root's group: root's group is trusted.
    let root_group = root.join("imagenet/root-group-writable.txt");
    write_file(&root_group, 1);
    chmod(&root_group, 0o664);
    // Offenders.
    let world = root.join("imagenet/world.txt");
    write_file(&world, 10);
    chmod(&world, 0o666);
    let group_dir = root.join("shared-labels");
    fs::create_dir(&group_dir).unwrap();
    give(&group_dir, 0, 5001);
    chmod(&group_dir, 0o2775);
    let members = root.join("imagenet/train/alice.bin");
    write_file(&members, 10);
    give(&members, 5001, 5001);
    chmod(&members, 0o644);
    // A link (mode 0777 on Linux) to the world-writable file: links are not judged.
    symlink("../world.txt", root.join("imagenet/train/link")).unwrap();
    let clean_before = owner_mode(&clean);

    let report = audit(
        std::slice::from_ref(&root),
        &Trusted::default(),
        false,
        4,
        &Progress::default(),
    )
    .unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // datasets, imagenet, train, clean, root-group, world, link, shared-labels, alice.bin
    assert_eq!(report.checked, 9);
    let found: Vec<(&Path, Vec<&str>)> = report
        .offenders
        .iter()
        .map(|o| (o.path.as_path(), o.why.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        found,
        // By path.
        vec![
            (members.as_path(), vec!["member-owned"]),
            (world.as_path(), vec!["world-writable"]),
            (group_dir.as_path(), vec!["group-writable"]),
        ]
    );
    assert!(report.offenders.iter().all(|o| !o.fixed));
    // Nothing changed without --fix.
    assert_eq!(owner_mode(&world), (0, 0, 0o666));
    assert_eq!(owner_mode(&members), (5001, 5001, 0o644));

    let fixed = audit(
        std::slice::from_ref(&root),
        &Trusted::default(),
        true,
        4,
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(fixed.offenders.len(), 3);
    for o in &fixed.offenders {
        assert!(o.fixed && o.fix_error.is_none(), "{o:?}");
    }
    // Root's now, and writable by no member: other write off everywhere; group write off
    // where the group is not trusted (kept for root's own group); groups kept.
    assert_eq!(owner_mode(&world), (0, 0, 0o664));
    assert_eq!(owner_mode(&members), (0, 5001, 0o644));
    assert_eq!(owner_mode(&group_dir), (0, 5001, 0o2755));
    assert_eq!(owner_mode(&clean), clean_before);
    assert_eq!(owner_mode(&root_group), (0, 0, 0o664));
    assert!(
        fs::symlink_metadata(root.join("imagenet/train/link"))
            .unwrap()
            .is_symlink()
    );

    let again = audit(
        std::slice::from_ref(&root),
        &Trusted::default(),
        false,
        4,
        &Progress::default(),
    )
    .unwrap();
    assert!(again.offenders.is_empty(), "{:?}", again.offenders);
}

#[test]
fn trusted_admins_and_groups_are_not_offenders_and_the_root_itself_is_judged() {
    if !is_root() {
        skipped("not root: the audit tree needs files owned by uid 5001 and group 5001");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap().join("ds");
    fs::create_dir(&root).unwrap();
    // The dataset's own directory is world-writable.
    chmod(&root, 0o777);
    let admin_file = root.join("by-admin.bin");
    write_file(&admin_file, 10);
    give(&admin_file, 5001, 5001);
    chmod(&admin_file, 0o664);
    let trusted = Trusted {
        uids: BTreeSet::from([5001]),
        gids: BTreeSet::from([5001]),
    };
    let report = audit(
        std::slice::from_ref(&root),
        &trusted,
        true,
        2,
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(report.offenders.len(), 1, "{:?}", report.offenders);
    assert_eq!(report.offenders[0].path, root);
    assert_eq!(report.offenders[0].why, vec!["world-writable"]);
    assert_eq!(owner_mode(&root), (0, 0, 0o775));
    // The admin's file, in the admin's group, is left as it was.
    assert_eq!(owner_mode(&admin_file), (5001, 5001, 0o664));
}
