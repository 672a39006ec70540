//! Dataset manifests: every entry of a source tree with its size, mtime and mode. A dataset's
//! version is the hash of its manifest, so any change to the tree makes a new version and an
//! unchanged tree keeps its version.

use crate::error::CacheError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Mutex;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (copied as a link, never followed).
    Symlink,
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Path relative to the root, `/`-separated; empty for the root itself.
    pub path: String,
    /// What it is.
    pub kind: Kind,
    /// Bytes (files only).
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Permission bits.
    pub mode: u32,
    /// Link target (symlinks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// BLAKE3 of the contents, when known (filled by a rescan for changed files, and by staging).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

impl Entry {
    /// True when two entries describe the same file by size, mtime, mode and kind (the quick
    /// check rsync uses).
    pub fn same_metadata(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.size == other.size
            && self.mtime_ns == other.mtime_ns
            && self.mode == other.mode
            && self.target == other.target
    }
}

/// Every entry of a tree, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Manifest {
    /// Entries, sorted by path.
    pub entries: Vec<Entry>,
}

impl Manifest {
    /// The version: the first 16 hex digits of BLAKE3 over every entry's path, kind, size, mtime,
    /// mode and link target, in path order. Content hashes do not enter it.
    pub fn version(&self) -> String {
        use std::io::Write as _;
        // Written straight into the hasher: a line per entry, no allocation per entry.
        let mut h = std::io::BufWriter::with_capacity(1 << 16, blake3::Hasher::new());
        for e in &self.entries {
            writeln!(
                h,
                "{:?}\t{}\t{}\t{}\t{:o}\t{}",
                e.kind,
                e.path,
                e.size,
                e.mtime_ns,
                e.mode,
                e.target.as_deref().unwrap_or("")
            )
            .expect("hashing does not fail");
        }
        let h = h.into_inner().expect("hashing does not fail");
        h.finalize().to_hex()[..16].to_string()
    }

    /// Regular files.
    pub fn files(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.kind == Kind::File)
    }

    /// Total bytes of the files.
    pub fn bytes(&self) -> u64 {
        self.files().map(|e| e.size).sum()
    }

    /// Entries by path.
    pub fn by_path(&self) -> BTreeMap<&str, &Entry> {
        self.entries.iter().map(|e| (e.path.as_str(), e)).collect()
    }
}

impl Manifest {
    /// Writes the manifest as JSON to `path`, completely or not at all.
    pub fn save(&self, path: &Path) -> Result<(), CacheError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| CacheError::io(dir, e))?;
        }
        let json = serde_json::to_vec(self).expect("a manifest serialises");
        crate::layout::write_atomic(path, &json)
    }

    /// Reads a manifest [`Manifest::save`] wrote.
    pub fn load(path: &Path) -> Result<Manifest, CacheError> {
        let bytes = std::fs::read(path).map_err(|e| CacheError::io(path, e))?;
        Manifest::from_bytes(&bytes, path)
    }

    /// Parses a manifest's bytes; `path` names it in the error.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Manifest, CacheError> {
        serde_json::from_slice(bytes).map_err(|e| CacheError::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}

/// What changed between two manifests.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Diff {
    /// Paths only in the new one.
    pub added: Vec<String>,
    /// Paths only in the old one.
    pub removed: Vec<String>,
    /// Paths in both whose metadata differs.
    pub changed: Vec<String>,
}

impl Diff {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// Bytes of the files in `new` that were added or changed.
    pub fn changed_bytes(&self, new: &Manifest) -> u64 {
        let by = new.by_path();
        self.added
            .iter()
            .chain(&self.changed)
            .filter_map(|p| by.get(p.as_str()))
            .filter(|e| e.kind == Kind::File)
            .map(|e| e.size)
            .sum()
    }
}

/// Compares two manifests by path and metadata, walking both in path order at once.
pub fn diff(old: &Manifest, new: &Manifest) -> Diff {
    let mut d = Diff::default();
    for pair in pairs(old, new) {
        match pair {
            (None, Some(n)) => d.added.push(n.path.clone()),
            (Some(o), None) => d.removed.push(o.path.clone()),
            (Some(o), Some(n)) if !o.same_metadata(n) => d.changed.push(n.path.clone()),
            _ => {}
        }
    }
    d
}

/// The entries of two path-sorted manifests side by side: (old, new) with the same path, or
/// one side alone.
pub fn pairs<'o, 'n>(
    old: &'o Manifest,
    new: &'n Manifest,
) -> impl Iterator<Item = (Option<&'o Entry>, Option<&'n Entry>)> {
    let (mut o, mut n) = (old.entries.iter().peekable(), new.entries.iter().peekable());
    std::iter::from_fn(move || match (o.peek(), n.peek()) {
        (None, None) => None,
        (Some(_), None) => Some((o.next(), None)),
        (None, Some(_)) => Some((None, n.next())),
        (Some(a), Some(b)) => match a.path.cmp(&b.path) {
            std::cmp::Ordering::Less => Some((o.next(), None)),
            std::cmp::Ordering::Greater => Some((None, n.next())),
            std::cmp::Ordering::Equal => Some((o.next(), n.next())),
        },
    })
}

/// A file's mtime in nanoseconds since the epoch.
pub(crate) fn mtime_ns(m: &std::fs::Metadata) -> i64 {
    m.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(m.mtime_nsec())
}

/// The entry for `path` (relative `rel`) from its metadata, not following links.
pub(crate) fn entry_of(
    path: &Path,
    rel: String,
    meta: &std::fs::Metadata,
) -> Result<Entry, CacheError> {
    let ft = meta.file_type();
    let kind = if ft.is_file() {
        Kind::File
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_symlink() {
        Kind::Symlink
    } else {
        return Err(CacheError::Special {
            path: path.to_path_buf(),
        });
    };
    let target = match kind {
        Kind::Symlink => {
            let t = std::fs::read_link(path).map_err(|e| CacheError::io(path, e))?;
            Some(
                t.to_str()
                    .ok_or_else(|| CacheError::NotUtf8 {
                        path: path.to_path_buf(),
                    })?
                    .to_string(),
            )
        }
        _ => None,
    };
    Ok(Entry {
        path: rel,
        kind,
        size: if kind == Kind::File { meta.len() } else { 0 },
        mtime_ns: mtime_ns(meta),
        mode: meta.permissions().mode() & 0o7777,
        target,
        hash: None,
    })
}

/// Walks `root` in parallel (never following links or crossing mounts: see [`crate::walk`]) and
/// records every entry.
/// `progress` is called with the count of entries seen so far, now and then.
pub fn scan(
    root: &Path,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Manifest, CacheError> {
    let meta = std::fs::symlink_metadata(root).map_err(|e| CacheError::io(root, e))?;
    if !meta.is_dir() {
        return Err(CacheError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let mut entries = crate::walk::walk(root, &meta, threads, progress)?;
    entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    progress(entries.len() as u64);
    Ok(Manifest { entries })
}

/// Hashes a file's contents with BLAKE3.
pub fn hash_file(path: &Path) -> Result<String, CacheError> {
    let mut h = blake3::Hasher::new();
    let f = std::fs::File::open(path).map_err(|e| CacheError::io(path, e))?;
    h.update_reader(f).map_err(|e| CacheError::io(path, e))?;
    Ok(h.finalize().to_hex().to_string())
}

/// Scans `root` again: entries whose size and mtime match `previous` keep its content hash;
/// changed and new files are hashed. Returns the new manifest and what changed.
pub fn rescan(
    root: &Path,
    previous: &Manifest,
    threads: usize,
) -> Result<(Manifest, Diff), CacheError> {
    let mut next = scan(root, threads, &|_| {})?;
    let d = diff(previous, &next);
    // Unchanged files keep their hashes; added and changed ones are hashed, in parallel.
    let mut hashes: Vec<Option<String>> = Vec::with_capacity(next.entries.len());
    let mut todo: Vec<usize> = Vec::new();
    for (o, n) in pairs(previous, &next) {
        let Some(n) = n else { continue };
        match o {
            Some(o) if n.kind == Kind::File && o.same_metadata(n) => hashes.push(o.hash.clone()),
            _ => {
                if n.kind == Kind::File {
                    todo.push(hashes.len());
                }
                hashes.push(None);
            }
        }
    }
    let fresh: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    let first_error: Mutex<Option<CacheError>> = Mutex::new(None);
    let at = std::sync::atomic::AtomicUsize::new(0);
    let entries = &next.entries;
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, todo.len().max(1)) {
            s.spawn(|| {
                while let Some(&i) = todo.get(at.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    match hash_file(&root.join(&entries[i].path)) {
                        Ok(h) => fresh.lock().expect("not poisoned").push((i, h)),
                        Err(e) => {
                            first_error.lock().expect("not poisoned").get_or_insert(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().expect("not poisoned") {
        return Err(e);
    }
    for (i, h) in fresh.into_inner().expect("not poisoned") {
        hashes[i] = Some(h);
    }
    for (e, h) in next.entries.iter_mut().zip(hashes) {
        if e.kind == Kind::File {
            e.hash = h;
        }
    }
    Ok((next, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b")).unwrap();
        std::fs::write(t.path().join("a/b/x.bin"), vec![7u8; 1000]).unwrap();
        std::fs::write(t.path().join("top.txt"), "hello").unwrap();
        symlink("top.txt", t.path().join("link")).unwrap();
        t
    }

    #[test]
    fn scans_sorted_with_kinds_and_a_stable_version() {
        let t = tree();
        let m = scan(t.path(), 4, &|_| {}).unwrap();
        let paths: Vec<&str> = m.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["", "a", "a/b", "a/b/x.bin", "link", "top.txt"]);
        assert_eq!(m.bytes(), 1005);
        assert_eq!(m.by_path()["link"].target.as_deref(), Some("top.txt"));
        assert_eq!(m.version(), scan(t.path(), 1, &|_| {}).unwrap().version());
        assert_eq!(m.version().len(), 16);
    }

    #[test]
    fn any_change_makes_a_new_version_and_rescan_hashes_only_changes() {
        let t = tree();
        let m = scan(t.path(), 2, &|_| {}).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(t.path().join("top.txt"), "hello!").unwrap();
        std::fs::write(t.path().join("new.txt"), "n").unwrap();
        let (next, d) = rescan(t.path(), &m, 2).unwrap();
        assert_ne!(next.version(), m.version());
        assert_eq!(d.added, ["new.txt"]);
        assert!(d.changed.contains(&"top.txt".to_string()), "{d:?}");
        let by = next.by_path();
        assert_eq!(
            by["top.txt"].hash.as_deref(),
            Some(blake3::hash(b"hello!").to_hex().as_str())
        );
        assert_eq!(
            by["a/b/x.bin"].hash, None,
            "unchanged files are not re-read"
        );
        let (again, d) = rescan(t.path(), &next, 2).unwrap();
        assert!(d.is_empty());
        assert_eq!(again.version(), next.version());
    }

    #[test]
    fn special_files_and_missing_roots_are_refused() {
        let t = tree();
        nix::unistd::mkfifo(
            &t.path().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        assert!(matches!(
            scan(t.path(), 2, &|_| {}),
            Err(CacheError::Special { .. })
        ));
        assert!(matches!(
            scan(&t.path().join("nope"), 2, &|_| {}),
            Err(CacheError::Io { .. })
        ));
        assert!(matches!(
            scan(&t.path().join("top.txt"), 2, &|_| {}),
            Err(CacheError::NotADirectory { .. })
        ));
    }
}
