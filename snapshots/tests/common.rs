//! Helpers shared by the snapshot crate's tests.
#![allow(dead_code)]

use labpool_snapshots::{BackupOptions, Progress, Repository, Snapshot};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A fresh repository in a temp dir.
pub fn repo(dir: &Path) -> Repository {
    Repository::init(&dir.join("repo")).unwrap()
}

/// Backs `path` up as source `src` at `time` (RFC 3339).
pub fn backup(repo: &Repository, src: &str, path: &Path, time: &str) -> Snapshot {
    let opts = BackupOptions {
        source: src.into(),
        path: path.to_path_buf(),
        excludes: vec![],
        one_file_system: true,
        host: "test".into(),
        time: time.parse().unwrap(),
    };
    labpool_snapshots::create(repo, &opts, &Progress::default())
        .unwrap()
        .snapshot
}

/// Deterministic pseudo-random bytes.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    labpool_testkit::bytes(seed, n)
}

/// What a tree looks like, entry by entry: kind, mode, owner, mtime, content or target, and
/// which entries share an inode.
pub fn describe(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<u64, PathBuf> = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let ft = m.file_type();
            let body = if ft.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if ft.is_symlink() {
                format!("link->{}", fs::read_link(&p).unwrap().display())
            } else if ft.is_file() {
                let first = inodes.entry(m.ino()).or_insert_with(|| rel.clone()).clone();
                let h = blake3::hash(&fs::read(&p).unwrap());
                format!(
                    "file {} {} link-of {}",
                    m.len(),
                    &h.to_hex()[..16],
                    first.display()
                )
            } else {
                format!("special {:o} rdev {}", m.mode() & 0o170000, m.rdev())
            };
            let mtime = m.mtime() * 1_000_000_000 + m.mtime_nsec();
            out.insert(
                rel,
                format!(
                    "{body} mode {:o} owner {}:{} mtime {mtime}",
                    m.permissions().mode() & 0o7777,
                    m.uid(),
                    m.gid()
                ),
            );
        }
    }
    out
}

/// Whether the tests run as root (owners, devices).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
