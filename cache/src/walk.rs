//! The parallel walk behind [`crate::manifest::scan`]: every entry of a tree, stat'ed relative
//! to its open directory.
//!
//! A rescan of an unchanged dataset is bound by one `lstat` per file, so the walk keeps each
//! one cheap: `fstatat` against the directory being read (no path resolution from the root),
//! entries gathered per directory (no lock per entry), and large directories split into chunks
//! so that one flat directory of a million files still uses every thread. It never follows
//! links, and it neither records nor enters a directory on another file system (a mount point
//! inside a dataset is not part of it).

use crate::error::CacheError;
use crate::manifest::{Entry, entry_of};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Entries of one directory are stat'ed by up to this many at a time per task.
const CHUNK: usize = 1024;

/// Every entry under `root` (the root itself as ""), in no particular order. `progress` gets
/// the count seen so far every 10,000 entries.
pub(crate) fn walk(
    root: &Path,
    root_meta: &std::fs::Metadata,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Entry>, CacheError> {
    let walk = Walk {
        device: root_meta.dev(),
        found: Mutex::new(vec![vec![entry_of(root, String::new(), root_meta)?]]),
        error: Mutex::new(None),
        failed: AtomicBool::new(false),
        seen: AtomicU64::new(1),
        progress,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|i| format!("labpool-scan-{i}"))
        .build()
        .map_err(|e| CacheError::Walk(e.to_string()))?;
    pool.scope(|s| walk.directory(s, root.to_path_buf(), String::new()));
    if let Some(e) = walk.error.into_inner().expect("not poisoned") {
        return Err(e);
    }
    Ok(walk
        .found
        .into_inner()
        .expect("not poisoned")
        .into_iter()
        .flatten()
        .collect())
}

struct Walk<'a> {
    /// The root's file system: directories elsewhere are left out.
    device: u64,
    /// Entries, a batch per directory chunk.
    found: Mutex<Vec<Vec<Entry>>>,
    /// The first error; once set, no new work starts.
    error: Mutex<Option<CacheError>>,
    failed: AtomicBool,
    seen: AtomicU64,
    progress: &'a (dyn Fn(u64) + Sync),
}

impl<'a> Walk<'a> {
    fn fail(&self, e: CacheError) {
        self.error.lock().expect("not poisoned").get_or_insert(e);
        self.failed.store(true, Ordering::Relaxed);
    }

    /// Reads directory `dir` (relative path `rel`) and stats its entries, in chunks.
    fn directory<'s>(&'s self, s: &rayon::Scope<'s>, dir: PathBuf, rel: String) {
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        let read = match std::fs::read_dir(&dir) {
            Ok(r) => r,
            Err(e) => return self.fail(CacheError::io(&dir, e)),
        };
        let mut chunks: Vec<Vec<std::fs::DirEntry>> = vec![Vec::new()];
        for d in read {
            match d {
                Ok(d) => {
                    if chunks.last().is_some_and(|c| c.len() == CHUNK) {
                        chunks.push(Vec::with_capacity(CHUNK));
                    }
                    chunks.last_mut().expect("one chunk at least").push(d);
                }
                Err(e) => return self.fail(CacheError::io(&dir, e)),
            }
        }
        let rel = std::sync::Arc::new(rel);
        // The last chunk runs on this thread; the others as tasks of their own.
        let last = chunks.pop();
        for chunk in chunks {
            let rel = rel.clone();
            s.spawn(move |s| self.entries(s, &rel, chunk));
        }
        if let Some(chunk) = last {
            self.entries(s, &rel, chunk);
        }
    }

    /// Stats `chunk` of the directory at relative path `rel` and walks the subdirectories found.
    fn entries<'s>(&'s self, s: &rayon::Scope<'s>, rel: &str, chunk: Vec<std::fs::DirEntry>) {
        let mut found = Vec::with_capacity(chunk.len());
        for d in chunk {
            if self.failed.load(Ordering::Relaxed) {
                return;
            }
            let name = d.file_name();
            let Some(name) = name.to_str() else {
                return self.fail(CacheError::NotUtf8 { path: d.path() });
            };
            let path_rel = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let path = d.path();
            // fstatat against the open directory: never follows a final link.
            let meta = match d.metadata() {
                Ok(m) => m,
                Err(e) => return self.fail(CacheError::io(&path, e)),
            };
            if meta.is_dir() {
                if meta.dev() != self.device {
                    continue;
                }
                let (child, child_rel) = (path.clone(), path_rel.clone());
                s.spawn(move |s| self.directory(s, child, child_rel));
            }
            match entry_of(&path, path_rel, &meta) {
                Ok(e) => found.push(e),
                Err(e) => return self.fail(e),
            }
        }
        let before = self.seen.fetch_add(found.len() as u64, Ordering::Relaxed);
        let after = before + found.len() as u64;
        if before / 10_000 != after / 10_000 {
            (self.progress)(after);
        }
        self.found.lock().expect("not poisoned").push(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same tree walked one entry at a time, the plain way.
    fn plain(dir: &Path, rel: &str, out: &mut Vec<(String, u64)>) {
        for d in std::fs::read_dir(dir).unwrap() {
            let d = d.unwrap();
            let name = d.file_name().into_string().unwrap();
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta = std::fs::symlink_metadata(d.path()).unwrap();
            out.push((r.clone(), if meta.is_file() { meta.len() } else { 0 }));
            if meta.is_dir() {
                plain(&d.path(), &r, out);
            }
        }
    }

    #[test]
    fn a_flat_directory_split_in_chunks_and_nested_ones_are_walked_whole_and_once() {
        let t = tempfile::tempdir().unwrap();
        let flat = t.path().join("flat");
        std::fs::create_dir(&flat).unwrap();
        // More than two chunks, so that some are stat'ed as tasks of their own.
        for i in 0..(2 * CHUNK + 7) {
            std::fs::write(flat.join(format!("{i:05}.bin")), vec![0u8; i % 13]).unwrap();
        }
        std::fs::create_dir_all(t.path().join("a/b/c")).unwrap();
        std::fs::write(t.path().join("a/b/c/deep.txt"), "deep").unwrap();
        std::os::unix::fs::symlink("a/b", t.path().join("to-b")).unwrap();
        let meta = std::fs::symlink_metadata(t.path()).unwrap();
        for threads in [1, 3, 8] {
            let mut got: Vec<(String, u64)> = walk(t.path(), &meta, threads, &|_| {})
                .unwrap()
                .into_iter()
                .map(|e| (e.path, e.size))
                .collect();
            got.sort();
            let mut want = vec![(String::new(), 0)];
            plain(t.path(), "", &mut want);
            want.sort();
            assert_eq!(got, want, "{threads} threads");
        }
        let entries = walk(t.path(), &meta, 2, &|_| {}).unwrap();
        let link = entries.iter().find(|e| e.path == "to-b").unwrap();
        assert_eq!(
            link.target.as_deref(),
            Some("a/b"),
            "links are read, not followed"
        );
        assert!(!entries.iter().any(|e| e.path.starts_with("to-b/")));
    }
}
