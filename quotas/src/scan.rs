//! Usage scanning: a parallel walk that never crosses a mount or follows a symlink, giving per
//! uid the allocated bytes (`du -B1`), apparent bytes (`du --apparent-size`) and entries, and
//! each uid's biggest directories. A file with several hard links is counted once, as `du`
//! counts it. A mount point is not counted at all, as `du -x` leaves it out.

use crate::walk::{Child, DirVisit, kind, walk};
use crate::{Progress, QuotaError};
use nix::libc;
use nix::sys::stat::FileStat;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How a scan runs.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Threads: more than the cores, since a cold walk waits on the disk.
    pub threads: usize,
    /// Directories are totalled down to this depth below the root (`home/alice/project` is 2).
    pub top_depth: usize,
    /// Biggest directories kept per uid.
    pub top_n: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            threads: 16,
            top_depth: 3,
            top_n: 10,
        }
    }
}

/// One uid's usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UidUsage {
    /// Allocated bytes (blocks x 512).
    pub bytes: u64,
    /// Apparent bytes (sizes).
    pub apparent: u64,
    /// Entries: files, directories, links.
    pub files: u64,
}

/// A directory and the bytes one uid holds in it (and below).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopDir {
    /// The directory.
    pub path: PathBuf,
    /// Allocated bytes of the uid's entries in it.
    pub bytes: u64,
}

/// What a scan found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScanReport {
    /// The root scanned.
    pub root: PathBuf,
    /// Per uid.
    pub users: BTreeMap<u32, UidUsage>,
    /// Per uid, the biggest directories, biggest first.
    pub top: BTreeMap<u32, Vec<TopDir>>,
    /// Mount points not entered.
    pub mounts_skipped: Vec<PathBuf>,
    /// Entries that could not be read, with why (first 100).
    pub errors: Vec<(PathBuf, String)>,
    /// How many could not be read.
    pub error_count: u64,
}

impl ScanReport {
    /// Totals over every uid.
    pub fn total(&self) -> UidUsage {
        self.users
            .values()
            .fold(UidUsage::default(), |a, u| UidUsage {
                bytes: a.bytes + u.bytes,
                apparent: a.apparent + u.apparent,
                files: a.files + u.files,
            })
    }
}

#[derive(Default)]
struct Totals {
    users: HashMap<u32, UidUsage>,
    /// (directory truncated to `top_depth`, uid) -> bytes directly in it (or below the depth).
    dirs: HashMap<(PathBuf, u32), u64>,
}

/// Scans `root`. `progress` counts entries and allocated bytes as they are seen.
pub fn scan(
    root: &Path,
    options: &ScanOptions,
    progress: &Progress,
) -> Result<ScanReport, QuotaError> {
    let root = std::fs::canonicalize(root).map_err(|e| QuotaError::io(root, e))?;
    let totals = Mutex::new(Totals::default());
    let links: Vec<Mutex<HashSet<(u64, u64)>>> =
        (0..64).map(|_| Mutex::new(HashSet::new())).collect();
    let first_sight = |s: &FileStat| {
        if kind(s) == libc::S_IFDIR || s.st_nlink <= 1 {
            return true;
        }
        let key = (s.st_dev, s.st_ino);
        let shard = (s.st_ino as usize ^ s.st_dev as usize) % links.len();
        links[shard]
            .lock()
            .map(|mut set| set.insert(key))
            .unwrap_or(true)
    };
    let outcome = walk(
        &root,
        options.threads,
        |dir: &DirVisit, children: &[Child]| {
            let mut local: HashMap<u32, UidUsage> = HashMap::new();
            let mut add = |s: &FileStat| {
                let u = local.entry(s.st_uid).or_default();
                u.bytes += s.st_blocks as u64 * 512;
                u.apparent += s.st_size as u64;
                u.files += 1;
            };
            add(dir.stat);
            for c in children {
                // Directories are counted when they are visited themselves.
                if !c.is_dir() && first_sight(&c.stat) {
                    add(&c.stat);
                }
            }
            let key: PathBuf = dir.rel.components().take(options.top_depth).collect();
            let (mut entries, mut bytes) = (0, 0);
            if let Ok(mut t) = totals.lock() {
                for (uid, u) in local {
                    entries += u.files;
                    bytes += u.bytes;
                    let all = t.users.entry(uid).or_default();
                    all.bytes += u.bytes;
                    all.apparent += u.apparent;
                    all.files += u.files;
                    *t.dirs.entry((key.clone(), uid)).or_default() += u.bytes;
                }
            }
            Progress::add(&progress.entries, entries);
            Progress::add(&progress.bytes, bytes);
            true
        },
    )?;
    let totals = totals.into_inner().unwrap_or_else(|p| p.into_inner());
    // Roll each directory's bytes up into its ancestors (depth 1 and below the root).
    let mut rolled: BTreeMap<(u32, PathBuf), u64> = BTreeMap::new();
    for ((dir, uid), bytes) in totals.dirs {
        let mut prefix = PathBuf::new();
        for c in dir.components() {
            prefix.push(c);
            *rolled.entry((uid, prefix.clone())).or_default() += bytes;
        }
    }
    let mut top: BTreeMap<u32, Vec<TopDir>> = BTreeMap::new();
    for ((uid, rel), bytes) in rolled {
        top.entry(uid).or_default().push(TopDir {
            path: root.join(rel),
            bytes,
        });
    }
    for dirs in top.values_mut() {
        dirs.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.path.cmp(&b.path)));
        dirs.truncate(options.top_n);
    }
    let error_count = outcome.errors.len() as u64;
    let mut errors = outcome.errors;
    errors.sort();
    errors.truncate(100);
    let mut mounts_skipped = outcome.mounts_skipped;
    mounts_skipped.sort();
    Ok(ScanReport {
        root,
        users: totals.users.into_iter().collect(),
        top,
        mounts_skipped,
        errors,
        error_count,
    })
}
