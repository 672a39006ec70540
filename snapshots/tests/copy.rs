//! Copies of a repository: only what is missing is sent, a copy cut short is finished by the
//! next one, damage in a copy is named by check, and a copy restores on its own.

mod common;
#[allow(dead_code)]
mod support;

use common::*;
use labpool_snapshots::check::check;
use labpool_snapshots::copy::{CopyReport, DirStore, Store, copy};
use labpool_snapshots::{Progress, Repository, Result, SnapshotError};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs;
use support::*;

/// A store that fails after `ok` writes, as a copy killed half-way does.
struct Cut {
    inner: DirStore,
    ok: Cell<usize>,
}

impl Store for Cut {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn list(&self) -> Result<BTreeMap<String, u64>> {
        self.inner.list()
    }
    fn get(&self, key: &str) -> Result<Vec<u8>> {
        self.inner.get(key)
    }
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        if self.ok.get() == 0 {
            // Half a file lands, as a kill in the middle of a write leaves it.
            let half = &bytes[..bytes.len() / 2];
            let _ = self.inner.put(key, half);
            return Err(SnapshotError::Invalid("killed".into()));
        }
        self.ok.set(self.ok.get() - 1);
        self.inner.put(key, bytes)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }
}

fn tree(dir: &std::path::Path, seed: u64) {
    fs::create_dir_all(dir.join("sub")).unwrap();
    fs::write(dir.join("a.txt"), format!("version {seed}")).unwrap();
    for i in 0..6 {
        fs::write(
            dir.join(format!("sub/blob{i}")),
            noise(300_000, seed * 10 + i),
        )
        .unwrap();
    }
}

#[test]
fn a_copy_sends_what_is_missing_survives_a_cut_and_restores_alone() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    let r = repo(t.path());
    tree(&src, 1);
    backup(&r, "data", &src, "2026-12-01T03:00:00Z");
    let primary = DirStore::new(&t.path().join("repo"));
    let copy_dir = t.path().join("copy");

    // Cut after the config: half a pack lands, no record.
    let cut = Cut {
        inner: DirStore::new(&copy_dir),
        ok: Cell::new(1),
    };
    assert!(copy(&primary, &cut, false, &Progress::default()).is_err());
    let target = DirStore::new(&copy_dir);
    assert!(
        target
            .list()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("snapshots/"))
    );
    let first = copy(&primary, &target, false, &Progress::default()).unwrap();
    assert!(
        first.files_sent >= 2,
        "the half pack again, and the record: {first:?}"
    );
    assert_eq!(first.files_present, 1, "the config was there");
    assert_eq!(first.records, 1);

    // A second backup: only its new packs and record travel.
    fs::write(src.join("a.txt"), "version 2").unwrap();
    backup(&r, "data", &src, "2026-12-02T03:00:00Z");
    let second = copy(&primary, &target, false, &Progress::default()).unwrap();
    let total: u64 = primary.list().unwrap().values().sum();
    assert!(second.bytes_sent < total / 4, "{second:?} of {total} bytes");
    assert_eq!(second.records, 2);
    assert_eq!(
        copy(&primary, &target, false, &Progress::default()).unwrap(),
        CopyReport {
            files_present: second.files_present + second.files_sent,
            records: 2,
            ..CopyReport::default()
        },
        "nothing left to send"
    );

    // The primary is lost: the copy opens as a repository, checks whole and restores.
    drop(r);
    fs::remove_dir_all(t.path().join("repo")).unwrap();
    let c = Repository::open(&copy_dir).unwrap();
    let snaps = c.snapshots().unwrap();
    assert_eq!(snaps.len(), 2);
    assert!(check(&c, true, &Progress::default()).unwrap().ok());
    let out = t.path().join("restored");
    restore_all(&c, &snaps[1], &out);
    // The snapshot's root is the source directory itself.
    assert_eq!(
        fs::read_to_string(out.join("src/a.txt")).unwrap(),
        "version 2"
    );
    assert_eq!(
        fs::read(out.join("src/sub/blob3")).unwrap(),
        noise(300_000, 13)
    );
}

#[test]
fn damage_in_a_copy_is_named_and_another_repository_is_not_overwritten() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    let r = repo(t.path());
    tree(&src, 3);
    backup(&r, "data", &src, "2026-12-01T03:00:00Z");
    let copy_dir = t.path().join("copy");
    copy(
        &DirStore::new(&t.path().join("repo")),
        &DirStore::new(&copy_dir),
        false,
        &Progress::default(),
    )
    .unwrap();
    // Flip a byte in the middle of the largest pack of the copy.
    let packs = DirStore::new(&copy_dir).list().unwrap();
    let (key, size) = packs
        .iter()
        .filter(|(k, _)| k.starts_with("packs/"))
        .max_by_key(|(_, s)| **s)
        .unwrap();
    let path = copy_dir.join(key);
    let mut bytes = fs::read(&path).unwrap();
    bytes[(*size / 3) as usize] ^= 0xff;
    fs::write(&path, bytes).unwrap();
    let c = Repository::open(&copy_dir).unwrap();
    let report = check(&c, true, &Progress::default()).unwrap();
    assert!(!report.ok());
    let pack_id = key.rsplit('/').next().unwrap();
    assert!(
        report.errors.iter().any(|e| e.contains(pack_id)),
        "{:?}",
        report.errors
    );
    assert!(!report.damaged_files.is_empty(), "{report:?}");

    // Another repository is never copied over.
    let other = Repository::init(&t.path().join("other")).unwrap();
    drop(other);
    let e = copy(
        &DirStore::new(&t.path().join("repo")),
        &DirStore::new(&t.path().join("other")),
        false,
        &Progress::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("holds another repository"), "{e}");
}
