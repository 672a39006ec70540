//! A version's staged manifest on disk: its entries with their BLAKE3 hashes, kept whole or,
//! for a version that took over an older one, as the entries that differ from a base.
//!
//! ```text
//! ROOT/NAME/VERSION.manifest.json       whole: {"entries": [...]}
//!                                       or changes: {"base": LEN, "entries": [...], "removed": [...]}
//! ROOT/NAME/VERSION.manifest-base.json  the base of the changes: a whole staged manifest
//! ROOT/NAME/VERSION.taken.json          while a take-over is staged: the taken version's changes
//! ```
//!
//! A take-over renames the older version's manifest files instead of rewriting them, and the
//! new version writes only what changed: a 1% change to a 100k-file dataset writes about a
//! thousand entries, not a hundred thousand. The changes are against one base, never a chain;
//! once they reach [`WHOLE_AT`] of the base, the manifest is written whole again, so reading
//! one costs at most a base and a quarter.
//!
//! The manifests of the versions staged or read lately are kept parsed ([`Parsed`]): the next
//! version's take-over, and a peer asking for many files of one version, do not parse again.

use crate::error::CacheError;
use crate::layout::{BASE, MANIFEST, write_atomic};
use crate::manifest::{Entry, Kind, Manifest, mtime_ns, pairs};
use crate::stage::remove_if_there;
use crate::store::NodeCache;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A staged manifest file as written.
#[derive(Debug, Default, Serialize, Deserialize)]
struct OnDisk {
    /// Whole: every entry. Changes: the entries added or changed since the base, in path order.
    entries: Vec<Entry>,
    /// Changes only: the base file's length in bytes, checked when it is read, so changes are
    /// never applied to a base they were not made against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base: Option<u64>,
    /// Changes only: the base's paths the version no longer holds, in path order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    removed: Vec<String>,
}

/// Changes are written whole again once they hold more than this fraction of the base's
/// entries (1/4).
const WHOLE_AT: usize = 4;

/// A staged manifest as read: the whole of it, and the base it was kept against, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Staged {
    /// Every entry.
    pub whole: Arc<Manifest>,
    /// The base on disk, when the file held changes.
    pub base: Option<Arc<Manifest>>,
}

/// Staged manifests parsed or written lately, by dataset and version, each with the identity
/// of its file: a version staged again writes a new file, which is parsed anew.
#[derive(Default)]
pub(crate) struct Parsed(Mutex<BTreeMap<(String, String), (Stamp, Staged)>>);

/// A manifest file's device, inode, mtime and size.
type Stamp = (u64, u64, i64, u64);

/// Versions whose manifests are kept parsed at once.
const PARSED_KEPT: usize = 8;

impl std::fmt::Debug for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        write!(f, "Parsed({n} manifests)")
    }
}

impl Parsed {
    fn get(&self, key: &(String, String), stamp: Stamp) -> Option<Staged> {
        let kept = self.0.lock().expect("not poisoned");
        kept.get(key)
            .filter(|(s, _)| *s == stamp)
            .map(|(_, m)| m.clone())
    }

    fn put(&self, key: (String, String), stamp: Stamp, staged: Staged) {
        let mut kept = self.0.lock().expect("not poisoned");
        if kept.len() >= PARSED_KEPT && !kept.contains_key(&key) {
            kept.clear();
        }
        kept.insert(key, (stamp, staged));
    }
}

fn stamp(p: &Path) -> Result<Stamp, CacheError> {
    let m = std::fs::metadata(p).map_err(|e| CacheError::io(p, e))?;
    Ok((m.dev(), m.ino(), mtime_ns(&m), m.len()))
}

impl NodeCache {
    /// The staged manifest (with hashes) of a complete version.
    pub fn staged_manifest(&self, name: &str, version: &str) -> Result<Manifest, CacheError> {
        Ok(self
            .read_staged(name, version, MANIFEST)?
            .whole
            .as_ref()
            .clone())
    }

    /// Reads a version's staged manifest file `suffix` ([`MANIFEST`], or `TAKEN` while a
    /// take-over is staged), applying its changes to the version's base.
    pub(crate) fn read_staged(
        &self,
        name: &str,
        version: &str,
        suffix: &str,
    ) -> Result<Staged, CacheError> {
        let p = self.side(name, version, suffix);
        let key = (name.to_string(), version.to_string());
        let kept = suffix == MANIFEST;
        let stamp = stamp(&p)?;
        if kept && let Some(staged) = self.parsed.get(&key, stamp) {
            return Ok(staged);
        }
        let staged = self.parse_staged(name, version, &p)?;
        if kept {
            self.parsed.put(key, stamp, staged.clone());
        }
        Ok(staged)
    }

    fn parse_staged(&self, name: &str, version: &str, p: &Path) -> Result<Staged, CacheError> {
        let file: OnDisk = read_json(p)?;
        let Some(len) = file.base else {
            return Ok(Staged {
                whole: Arc::new(Manifest {
                    entries: file.entries,
                }),
                base: None,
            });
        };
        let base_path = self.side(name, version, BASE);
        let on_disk = std::fs::metadata(&base_path).map_err(|e| CacheError::io(&base_path, e))?;
        if on_disk.len() != len {
            return Err(CacheError::Corrupt {
                path: p.to_path_buf(),
                message: format!(
                    "its changes were made against a base of {len} bytes, but {} holds {}; remove {} and its side files ({}.*) so the version is staged again",
                    base_path.display(),
                    on_disk.len(),
                    self.dir(name, version).display(),
                    self.dir(name, version).display(),
                ),
            });
        }
        let base = Manifest::load(&base_path)?;
        Ok(Staged {
            whole: Arc::new(apply(&base, file.entries, &file.removed)),
            base: Some(Arc::new(base)),
        })
    }

    /// The base a take-over left for `version`, when there is one.
    pub(crate) fn staged_base(
        &self,
        name: &str,
        version: &str,
    ) -> Result<Option<Arc<Manifest>>, CacheError> {
        let p = self.side(name, version, BASE);
        if !p.exists() {
            return Ok(None);
        }
        Ok(Some(Arc::new(Manifest::load(&p)?)))
    }

    /// Writes `version`'s staged manifest: `manifest`'s entries, each file with its hash from
    /// `hashes` (one per file, in order). With a `base` (on disk as the version's base file)
    /// only the entries that differ from it are written, unless they are too many; then the
    /// manifest is written whole and the base file goes.
    pub(crate) fn write_staged(
        &self,
        name: &str,
        version: &str,
        manifest: &Manifest,
        hashes: &[String],
        base: Option<&Arc<Manifest>>,
    ) -> Result<(), CacheError> {
        let p = self.side(name, version, MANIFEST);
        let base_path = self.side(name, version, BASE);
        let whole = Arc::new(Manifest {
            entries: with_hashes(manifest, hashes).collect(),
        });
        let mut kept_base = None;
        match base.map(|b| (b, changes(b, &whole))) {
            Some((b, mut changes))
                if (changes.entries.len() + changes.removed.len()) * WHOLE_AT
                    <= b.entries.len() =>
            {
                changes.base = Some(stamp(&base_path)?.3);
                write_atomic(&p, &serde_json::to_vec(&changes).expect("serialises"))?;
                kept_base = Some(b.clone());
            }
            _ => {
                write_atomic(&p, &serde_json::to_vec(whole.as_ref()).expect("serialises"))?;
                remove_if_there(&base_path)?;
            }
        }
        let staged = Staged {
            whole,
            base: kept_base,
        };
        self.parsed
            .put((name.to_string(), version.to_string()), stamp(&p)?, staged);
        Ok(())
    }
}

fn read_json(p: &Path) -> Result<OnDisk, CacheError> {
    let bytes = std::fs::read(p).map_err(|e| CacheError::io(p, e))?;
    serde_json::from_slice(&bytes).map_err(|e| CacheError::Corrupt {
        path: p.to_path_buf(),
        message: e.to_string(),
    })
}

/// `manifest`'s entries, each file with its hash from `hashes` in order.
fn with_hashes<'a>(
    manifest: &'a Manifest,
    hashes: &'a [String],
) -> impl Iterator<Item = Entry> + 'a {
    let mut next = hashes.iter();
    manifest.entries.iter().map(move |e| {
        let mut e = e.clone();
        if e.kind == Kind::File {
            e.hash = next.next().cloned();
        }
        e
    })
}

/// The entries of `whole` that `base` does not hold as they are, and the paths of `base` that
/// `whole` does not hold.
fn changes(base: &Manifest, whole: &Manifest) -> OnDisk {
    let mut out = OnDisk::default();
    for pair in pairs(base, whole) {
        match pair {
            (Some(b), None) => out.removed.push(b.path.clone()),
            (Some(b), Some(n)) if b == n => {}
            (_, Some(n)) => out.entries.push(n.clone()),
            (None, None) => {}
        }
    }
    out
}

/// `base` with `changed` entries put in (replacing those at the same path) and `removed` paths
/// taken out; all three are in path order.
fn apply(base: &Manifest, changed: Vec<Entry>, removed: &[String]) -> Manifest {
    let mut removed = removed.iter().peekable();
    let mut changed = changed.into_iter().peekable();
    let mut entries = Vec::with_capacity(base.entries.len() + changed.len());
    for b in &base.entries {
        while let Some(c) = changed.next_if(|c| c.path < b.path) {
            entries.push(c);
        }
        if let Some(c) = changed.next_if(|c| c.path == b.path) {
            entries.push(c);
        } else if removed.next_if(|r| **r == b.path).is_none() {
            entries.push(b.clone());
        }
    }
    entries.extend(changed);
    Manifest { entries }
}
