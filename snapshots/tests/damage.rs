//! Damaged data: a flipped byte is traced to its files and only those fail to restore, and
//! prune leaves a pack with damaged live data alone.

mod common;

use common::*;
use labpool_snapshots::browse;
use labpool_snapshots::check::check;
use labpool_snapshots::prune::{forget, prune};
use labpool_snapshots::restore::{open_dir_nofollow, restore_node};
use labpool_snapshots::{Policy, Progress, RestoreOptions};
use std::fs;

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
