//! What a node holds: its versions, the bytes each holds alone, and their use.

use crate::error::CacheError;
use crate::layout::{STATS, write_atomic};
use crate::store::NodeCache;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use walkdir::WalkDir;

/// A version in the cache, as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedVersion {
    /// Dataset.
    pub name: String,
    /// Version.
    pub version: String,
    /// Staged completely.
    pub complete: bool,
    /// Bytes of its files.
    pub bytes: u64,
    /// Bytes that only it holds (what removing it frees; the rest is shared by hard links).
    pub unique_bytes: u64,
    /// Files.
    pub files: u64,
    /// Jobs that used it.
    pub uses: u64,
    /// Of those, jobs that found it already staged.
    pub hits: u64,
    /// Last use, ms since the epoch.
    pub last_use_ms: Option<i64>,
}

/// The versions in a cache and the bytes it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// Versions, by name and version.
    pub versions: Vec<CachedVersion>,
    /// Bytes on disk, hard-linked files counted once.
    pub used_bytes: u64,
    /// By dataset: bytes that removing all its versions would free (files its versions share
    /// counted once; files linked from elsewhere not at all).
    #[serde(default)]
    pub datasets: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Stats {
    uses: u64,
    hits: u64,
    last_use_ms: Option<i64>,
}

/// Inode → (links seen in this dataset, links in all, size).
type Inodes = BTreeMap<(u64, u64), (u64, u64, u64)>;

impl NodeCache {
    /// Every version in the cache, complete or not, by name and version.
    pub fn list(&self) -> Result<Vec<CachedVersion>, CacheError> {
        Ok(self.inventory()?.versions)
    }

    /// Every version, and the bytes the whole cache holds (hard-linked files counted once,
    /// manifests and journals included), from one walk.
    pub fn inventory(&self) -> Result<Inventory, CacheError> {
        let root = self.root();
        let mut versions = Vec::new();
        let mut seen = BTreeSet::new();
        let mut used = 0;
        let mut names: Vec<String> = std::fs::read_dir(root)
            .map_err(|e| CacheError::io(root, e))?
            .flatten()
            .filter(|d| d.path().is_dir())
            .filter_map(|d| d.file_name().into_string().ok())
            .collect();
        names.sort();
        let mut datasets = BTreeMap::new();
        for name in names {
            let mut inodes = Inodes::new();
            let dir = root.join(&name);
            let mut entries: Vec<(String, bool)> = std::fs::read_dir(&dir)
                .map_err(|e| CacheError::io(&dir, e))?
                .flatten()
                .filter_map(|d| Some((d.file_name().into_string().ok()?, d.path().is_dir())))
                .collect();
            entries.sort();
            for (entry, is_dir) in entries {
                if !is_dir {
                    used += std::fs::symlink_metadata(dir.join(&entry)).map_or(0, |m| m.len());
                    continue;
                }
                if entry.starts_with('.') {
                    continue;
                }
                let version = entry;
                let complete = self.is_complete(&name, &version);
                let (bytes, unique_bytes, files) = usage(
                    &self.dir(&name, &version),
                    &mut seen,
                    &mut used,
                    &mut inodes,
                )?;
                let stats = read_stats(&self.side(&name, &version, STATS));
                versions.push(CachedVersion {
                    name: name.clone(),
                    version,
                    complete,
                    bytes,
                    unique_bytes,
                    files,
                    uses: stats.uses,
                    hits: stats.hits,
                    last_use_ms: stats.last_use_ms,
                });
            }
            let own: u64 = inodes
                .values()
                .filter(|(seen, links, _)| seen == links)
                .map(|(_, _, size)| size)
                .sum();
            datasets.insert(name, own);
        }
        Ok(Inventory {
            versions,
            used_bytes: used,
            datasets,
        })
    }

    /// Records that a job used a version; `hit` when it was staged already.
    pub fn note_use(
        &self,
        name: &str,
        version: &str,
        hit: bool,
        at_ms: i64,
    ) -> Result<(), CacheError> {
        let p = self.side(name, version, STATS);
        let mut stats = read_stats(&p);
        stats.uses += 1;
        stats.hits += u64::from(hit);
        stats.last_use_ms = Some(at_ms);
        write_atomic(&p, &serde_json::to_vec(&stats).expect("stats serialise"))
    }

    /// Bytes the whole cache holds (see [`NodeCache::inventory`]); 0 when it cannot be read.
    pub fn used_bytes(&self) -> u64 {
        self.inventory().map_or(0, |i| i.used_bytes)
    }
}

/// A version's stats; none yet (or unreadable, as they are only advice) reads as zero.
fn read_stats(path: &Path) -> Stats {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// (bytes, bytes held by this tree alone, files) of a version directory; adds the bytes of
/// inodes not in `seen` to `used`. Directories themselves are not counted.
fn usage(
    dir: &Path,
    seen: &mut BTreeSet<(u64, u64)>,
    used: &mut u64,
    inodes: &mut Inodes,
) -> Result<(u64, u64, u64), CacheError> {
    let (mut bytes, mut unique, mut files) = (0, 0, 0);
    for entry in WalkDir::new(dir).min_depth(1) {
        let (e, m) = match entry.and_then(|e| e.metadata().map(|m| (e, m))) {
            Ok(em) => em,
            Err(err) if vanished(&err) => continue,
            Err(err) => return Err(walk_error(dir, err)),
        };
        if m.is_dir() {
            continue;
        }
        if seen.insert((m.dev(), m.ino())) {
            *used += m.len();
        }
        let partial = e
            .file_name()
            .to_string_lossy()
            .ends_with(crate::layout::PARTIAL_SUFFIX);
        if m.is_file() && !partial {
            bytes += m.len();
            files += 1;
            if m.nlink() == 1 {
                unique += m.len();
            }
            let e = inodes
                .entry((m.dev(), m.ino()))
                .or_insert((0, m.nlink(), m.len()));
            e.0 += 1;
        }
    }
    Ok((bytes, unique, files))
}

/// An entry gone between its listing and its stat (a stage renaming a `.partial`, a version
/// being removed): it holds no bytes any more, which is no error.
fn vanished(err: &walkdir::Error) -> bool {
    err.io_error()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

fn walk_error(dir: &Path, err: walkdir::Error) -> CacheError {
    let path = err.path().unwrap_or(dir).to_path_buf();
    let source = err
        .into_io_error()
        .unwrap_or_else(|| std::io::Error::other("a file system loop"));
    CacheError::CacheWalk { path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_files_and_links_once_and_skips_partials() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("sub")).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("sub/x.bin"), vec![1u8; 100]).unwrap();
        std::fs::write(a.join("y.bin"), vec![2u8; 10]).unwrap();
        std::fs::write(a.join("y.bin.labpool.partial"), vec![3u8; 7]).unwrap();
        std::fs::hard_link(a.join("sub/x.bin"), b.join("x.bin")).unwrap();
        let (mut seen, mut used, mut inodes) = (BTreeSet::new(), 0, Inodes::new());
        let ua = usage(&a, &mut seen, &mut used, &mut inodes).unwrap();
        assert_eq!(
            ua,
            (110, 10, 2),
            "x.bin is shared with b, the partial is no file"
        );
        assert_eq!(used, 117);
        let ub = usage(&b, &mut seen, &mut used, &mut inodes).unwrap();
        assert_eq!(ub, (100, 0, 1));
        assert_eq!(used, 117, "the linked file is stored once");
        let missing = usage(&t.path().join("gone"), &mut seen, &mut used, &mut inodes);
        assert_eq!(
            missing.unwrap(),
            (0, 0, 0),
            "a version removed mid-walk holds nothing"
        );
    }
}
