//! Restore and size helpers the repository tests share, on top of `common`: restoring a node
//! into a directory, restoring a whole snapshot, and the bytes under a directory.

use crate::common::is_root;
use labpool_snapshots::restore::{open_dir_nofollow, restore_node};
use labpool_snapshots::{Progress, RestoreOptions};
use std::fs;
use std::path::Path;

/// Restores `node` into the existing directory `dir`.
pub fn into(
    repo: &labpool_snapshots::Repository,
    node: &labpool_snapshots::tree::Node,
    dir: &Path,
    opts: &RestoreOptions,
) -> labpool_snapshots::Result<labpool_snapshots::RestoreReport> {
    let fd = open_dir_nofollow(dir).unwrap();
    restore_node(repo, node, &fd, dir, opts, &Progress::default())
}

/// Restores the whole of `snap` into `target` (created), owners too when root; only sockets
/// may fail.
pub fn restore_all(
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

/// The bytes of the files under `p`.
pub fn dir_size(p: &Path) -> u64 {
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
