//! Copies of a repository somewhere else: another disk, another node, an object store. A
//! repository's files are immutable and named by their content (packs) or id (records), so a
//! copy sends only what the other side lacks, and a copy killed half-way is finished by the
//! next one.
//!
//! What is copied, in this order: `config.json`, the packs, then the snapshot records, so a
//! record never arrives before the data it names. The index is not copied: it is derived, and
//! a copy opened as a repository rebuilds it from the packs and records.
//!
//! A [`Store`] is a place holding a repository's files by key (`packs/ab/ab12…`); [`DirStore`]
//! is a directory, and the binary adds an S3 bucket and a node's agent. [`copy`] works between
//! any two stores, so fetching a copy back is the same call the other way round.

use crate::error::{Result, SnapshotError};
use crate::progress::Progress;
use crate::repo::write_durably;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// A place that holds a repository's files by key.
pub trait Store {
    /// Where it is, for messages (`/backup/copy`, `s3://bucket/prefix`).
    fn describe(&self) -> String;
    /// Every repository file it holds, with its size.
    fn list(&self) -> Result<BTreeMap<String, u64>>;
    /// The file `key`.
    fn get(&self, key: &str) -> Result<Vec<u8>>;
    /// Stores `bytes` as `key`, whole or not at all.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;
    /// Removes `key` (already gone is fine).
    fn delete(&self, key: &str) -> Result<()>;
}

/// Which files a repository copy is made of, and in what order they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// `config.json`.
    Config,
    /// `packs/XY/<64 hex>`.
    Pack,
    /// `snapshots/<16 to 64 hex>.json`.
    Record,
}

/// What part of a repository `key` is (`config.json`, `packs/XY/<64 hex>`,
/// `snapshots/<16 to 64 hex>.json`); `None` for anything else (the index, locks, temporary
/// files), which a copy never sends, and for a key that could escape the repository.
pub fn part_of(key: &str) -> Option<Part> {
    let hex = |s: &str, lens: std::ops::RangeInclusive<usize>| {
        lens.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let parts: Vec<&str> = key.split('/').collect();
    match parts.as_slice() {
        ["config.json"] => Some(Part::Config),
        ["packs", dir, id] if dir.len() == 2 && hex(id, 64..=64) && id.starts_with(dir) => {
            Some(Part::Pack)
        }
        ["snapshots", file] => file
            .strip_suffix(".json")
            .filter(|id| hex(id, 16..=64))
            .map(|_| Part::Record),
        _ => None,
    }
}

/// What a copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CopyReport {
    /// Files sent.
    pub files_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Files the other side already had.
    pub files_present: u64,
    /// Files removed from the other side (`mirror`).
    pub files_removed: u64,
    /// Snapshot records the other side holds now.
    pub records: u64,
}

/// Copies the repository files in `from` that `to` lacks (or holds at another size, as a file
/// cut short). With `mirror`, files `to` holds that `from` no longer has go afterwards,
/// records before packs; without it the copy only grows, so a mistake at the source (or a
/// forget) cannot reach it. Refuses a `to` that holds another repository.
pub fn copy(
    from: &dyn Store,
    to: &dyn Store,
    mirror: bool,
    progress: &Progress,
) -> Result<CopyReport> {
    let source: BTreeMap<String, u64> = from
        .list()?
        .into_iter()
        .filter(|(k, _)| part_of(k).is_some())
        .collect();
    if !source.contains_key("config.json") {
        return Err(SnapshotError::Invalid(format!(
            "{} holds no repository (no config.json)",
            from.describe()
        )));
    }
    let there: BTreeMap<String, u64> = to
        .list()?
        .into_iter()
        .filter(|(k, _)| part_of(k).is_some())
        .collect();
    if there.contains_key("config.json") && to.get("config.json")? != from.get("config.json")? {
        return Err(SnapshotError::Invalid(format!(
            "{} holds another repository (its config.json differs from {}'s); copy to an empty place",
            to.describe(),
            from.describe()
        )));
    }
    let mut todo: Vec<(&String, &u64)> = source
        .iter()
        .filter(|(k, size)| there.get(*k) != Some(size))
        .collect();
    todo.sort_by_key(|(k, _)| (part_of(k), k.to_string()));
    let mut report = CopyReport {
        files_present: (source.len() - todo.len()) as u64,
        ..CopyReport::default()
    };
    progress
        .total_bytes
        .store(todo.iter().map(|(_, s)| **s).sum(), Ordering::Relaxed);
    for (key, size) in todo {
        let bytes = from.get(key)?;
        if bytes.len() as u64 != *size {
            return Err(SnapshotError::Invalid(format!(
                "{key} changed size while it was copied ({} bytes, then {}); is a prune running? try again",
                size,
                bytes.len()
            )));
        }
        to.put(key, &bytes)?;
        report.files_sent += 1;
        report.bytes_sent += *size;
        Progress::add(&progress.bytes, *size);
        Progress::add(&progress.entries, 1);
    }
    if mirror {
        let mut gone: Vec<&String> = there.keys().filter(|k| !source.contains_key(*k)).collect();
        gone.sort_by_key(|k| std::cmp::Reverse(part_of(k)));
        for key in gone {
            to.delete(key)?;
            report.files_removed += 1;
        }
    }
    report.records = to
        .list()?
        .keys()
        .filter(|k| part_of(k) == Some(Part::Record))
        .count() as u64;
    Ok(report)
}

/// A repository's files in a local directory (a repository itself, or a copy on a mounted
/// disk). Files are written to a temporary name, synced, then renamed into place
/// ([`write_durably`]).
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// The store at `root` (created on the first write).
    pub fn new(root: &Path) -> DirStore {
        DirStore {
            root: root.to_path_buf(),
        }
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        part_of(key)
            .map(|_| self.root.join(key))
            .ok_or_else(|| SnapshotError::Invalid(format!("{key:?} is not a repository file")))
    }
}

impl Store for DirStore {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn list(&self) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        let mut add = |key: String, path: &Path| -> Result<()> {
            if part_of(&key).is_some() {
                let meta = fs::symlink_metadata(path).map_err(SnapshotError::io("stat", path))?;
                if meta.is_file() {
                    out.insert(key, meta.len());
                }
            }
            Ok(())
        };
        if self.root.join("config.json").exists() {
            add("config.json".into(), &self.root.join("config.json"))?;
        }
        for top in ["packs", "snapshots"] {
            let dir = self.root.join(top);
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries {
                let e = e.map_err(SnapshotError::io("read", &dir))?;
                let name = e.file_name().to_string_lossy().into_owned();
                if top == "snapshots" {
                    add(format!("snapshots/{name}"), &e.path())?;
                    continue;
                }
                let Ok(inner) = fs::read_dir(e.path()) else {
                    continue;
                };
                for f in inner {
                    let f = f.map_err(SnapshotError::io("read", &e.path()))?;
                    let file = f.file_name().to_string_lossy().into_owned();
                    add(format!("packs/{name}/{file}"), &f.path())?;
                }
            }
        }
        Ok(out)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        let path = self.path(key)?;
        fs::read(&path).map_err(SnapshotError::io("read", &path))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(key)?;
        let dir = path.parent().expect("a key has a directory or the root");
        fs::create_dir_all(dir).map_err(SnapshotError::io("create", dir))?;
        write_durably(&path, bytes)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(SnapshotError::io("remove", &path)(e))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_repository_files_are_keys() {
        let hex = "ab".repeat(32);
        assert_eq!(part_of("config.json"), Some(Part::Config));
        assert_eq!(part_of(&format!("packs/ab/{hex}")), Some(Part::Pack));
        assert_eq!(
            part_of(&format!("snapshots/{hex}.json")),
            Some(Part::Record)
        );
        for bad in [
            "index.sqlite".to_string(),
            "lock".into(),
            format!("packs/cd/{hex}"),
            format!("packs/ab/../../{hex}"),
            format!("snapshots/../{hex}.json"),
            format!("/packs/ab/{hex}"),
            "packs/tmp/x".into(),
        ] {
            assert_eq!(part_of(&bad), None, "{bad}");
        }
    }
}
