//! Where a node cache keeps things on disk.
//!
//! ```text
//! ROOT/NAME/VERSION/...            the files, exactly as the manifest lists them
//! ROOT/NAME/VERSION.journal        while staging: one "hash<TAB>path" line per finished file
//! ROOT/NAME/VERSION.manifest.json  once staged: the manifest with each file's BLAKE3, whole or
//!                                  as changes against VERSION.manifest-base.json (see
//!                                  crate::staged, which also names VERSION.taken.json)
//! ROOT/NAME/VERSION.complete       once staged: the marker; without it a version does not exist
//! ROOT/NAME/VERSION.stats.json     uses, hits and last use
//! ROOT/NAME/.removing-VERSION      a version being removed, already invisible
//! .../FILE.labpool.partial         a copy not yet synced and renamed into place
//! ```

use crate::error::CacheError;
use crate::store::NodeCache;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// The side files next to a version directory, by suffix.
pub(crate) const COMPLETE: &str = "complete";
pub(crate) const JOURNAL: &str = "journal";
pub(crate) const MANIFEST: &str = "manifest.json";
pub(crate) const BASE: &str = "manifest-base.json";
pub(crate) const TAKEN: &str = "taken.json";
pub(crate) const STATS: &str = "stats.json";

/// Prefix of a version directory renamed away for removal.
pub(crate) const REMOVING: &str = ".removing-";

/// What a copy's name ends with until it is complete and synced. Distinct enough that a
/// dataset's own `*.partial` files never clash with it.
pub const PARTIAL_SUFFIX: &str = ".labpool.partial";

/// The `.partial` name a copy is written under.
pub fn partial_path(dst: &Path) -> PathBuf {
    let mut name = dst.file_name().unwrap_or_default().to_os_string();
    name.push(PARTIAL_SUFFIX);
    dst.with_file_name(name)
}

impl NodeCache {
    /// Where a version's files are.
    pub fn dir(&self, name: &str, version: &str) -> PathBuf {
        self.root().join(name).join(version)
    }

    /// The side file `VERSION.suffix` of a version.
    pub(crate) fn side(&self, name: &str, version: &str, suffix: &str) -> PathBuf {
        self.root().join(name).join(format!("{version}.{suffix}"))
    }

    /// Where a version being removed is renamed to.
    pub(crate) fn trash(&self, name: &str, version: &str) -> PathBuf {
        self.root().join(name).join(format!("{REMOVING}{version}"))
    }

    /// True when the version is staged completely.
    pub fn is_complete(&self, name: &str, version: &str) -> bool {
        self.side(name, version, COMPLETE).exists()
    }

    /// Complete versions of `name` other than `except`, sorted. Only the markers are read:
    /// listing the whole cache's usage would cost a stat per cached file.
    pub(crate) fn complete_versions(&self, name: &str, except: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.root().join(name))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".complete")
                    .map(str::to_string)
            })
            .filter(|v| !except.contains(&v.as_str()))
            .collect();
        out.sort();
        out
    }
}

/// One journal line: a file copied, durable and in place.
pub(crate) fn journal_line(hash: &str, path: &str) -> String {
    format!("{hash}\t{path}\n")
}

/// The files a journal lists as done, with their hashes; empty when there is none.
pub(crate) fn read_journal(path: &Path) -> Result<BTreeMap<String, String>, CacheError> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(CacheError::io(path, e)),
    };
    let mut out = BTreeMap::new();
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| CacheError::io(path, e))?;
        // A torn last line (crash while appending) is ignored: that file is done again.
        if let Some((hash, p)) = line.split_once('\t')
            && hash.len() == 64
        {
            out.insert(p.to_string(), hash.to_string());
        }
    }
    Ok(out)
}

/// Writes a file completely or not at all.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    let tmp = partial_path(path);
    let mut f = File::create(&tmp).map_err(|e| CacheError::io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| CacheError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| CacheError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_keeps_whole_lines_and_drops_a_torn_one() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("v.journal");
        assert!(
            read_journal(&p).unwrap().is_empty(),
            "no journal: nothing done"
        );
        let h = "a".repeat(64);
        let body = format!("{}{}\tc.bin", journal_line(&h, "b.bin"), &h[..10]);
        std::fs::write(&p, body).unwrap();
        let done = read_journal(&p).unwrap();
        assert_eq!(done.len(), 1, "{done:?}");
        assert_eq!(done["b.bin"], h);
    }
}
