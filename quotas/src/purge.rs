//! The scratch purge: a plan of what is past its age, then an execution that deletes it safely.
//!
//! A file's age is the time since the newest of its atime, mtime and ctime (mtime and ctime
//! alone on a `noatime` mount). Only non-directories are removed: regular files, symlinks (the
//! link itself, never its target), FIFOs and sockets. Directories are left, empty or not.
//!
//! Safety against the classic attacks on tmp cleaners:
//! - every directory is opened relative to its parent's descriptor with `O_NOFOLLOW`, so a
//!   directory swapped for a symlink (to `/etc`, to someone's home) is not entered;
//! - mounts are never entered;
//! - just before `unlinkat`, the entry is opened with `O_PATH | O_NOFOLLOW` and checked on that
//!   descriptor: the same inode as planned, still past its age;
//! - a running job's working directory and any directory holding a `.labpool-keep` marker are
//!   skipped whole, at planning and again at execution.
//!
//! What remains: between the check and `unlinkat` the directory's owner could rename another
//! of their own entries into the checked name; `unlinkat` then removes that name, in the same
//! directory, and never follows it.

use crate::mounts::Mounts;
use crate::walk::{BTRFS_SUBVOLUME_INO, Child, DirVisit, dir_flags, kind, open_root, walk};
use crate::{Progress, QuotaError};
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::libc;
use nix::sys::stat::{FileStat, Mode, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The marker that keeps the directory holding it, and everything below, from being purged.
pub const KEEP_MARKER: &str = ".labpool-keep";

/// What is purged.
#[derive(Debug, Clone)]
pub struct PurgePolicy {
    /// Files untouched this long are removed.
    pub max_age: Duration,
    /// Owners are told this long before their files pass `max_age`.
    pub warn: Duration,
    /// Walk threads.
    pub threads: usize,
}

impl Default for PurgePolicy {
    fn default() -> Self {
        PurgePolicy {
            max_age: Duration::from_secs(30 * 86_400),
            warn: Duration::from_secs(7 * 86_400),
            threads: 16,
        }
    }
}

/// The moment and the surroundings a plan or an execution is made in.
#[derive(Debug, Clone)]
pub struct PurgeContext {
    /// Now, seconds since the epoch.
    pub now: i64,
    /// Directories that must not be touched: the working directories of running jobs.
    pub protected: Vec<PathBuf>,
}

/// One entry past (or near) its age.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// Its path, relative to the root.
    pub path: PathBuf,
    /// Owner.
    pub uid: u32,
    /// Allocated bytes.
    pub bytes: u64,
    /// The newest of its times that count, seconds since the epoch.
    pub touched: i64,
    /// Device, to check it is the same entry at execution.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Whether it is a symlink (removed as a link).
    pub symlink: bool,
}

impl Candidate {
    /// Its age at `now`, seconds.
    pub fn age(&self, now: i64) -> i64 {
        now - self.touched
    }
}

/// What a purge would do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PurgePlan {
    /// The scratch root.
    pub root: PathBuf,
    /// When it was made, seconds since the epoch.
    pub made: i64,
    /// The age limit, seconds.
    pub max_age_secs: u64,
    /// The warning window, seconds.
    pub warn_secs: u64,
    /// Whether atime counts (false on a `noatime` mount).
    pub atime_counted: bool,
    /// Said in the plan and the logs when atime does not count.
    pub atime_note: Option<String>,
    /// To be removed, oldest first.
    pub delete: Vec<Candidate>,
    /// Passing the limit within the warning window, soonest first.
    pub warn: Vec<Candidate>,
    /// Directories kept whole by a `.labpool-keep` marker.
    pub kept: Vec<PathBuf>,
    /// Running jobs' working directories, skipped.
    pub jobs_skipped: Vec<PathBuf>,
    /// Mount points not entered.
    pub mounts_skipped: Vec<PathBuf>,
    /// Entries that could not be read.
    pub errors: Vec<(PathBuf, String)>,
}

/// Per owner: entries and allocated bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Entries.
    pub files: u64,
    /// Allocated bytes.
    pub bytes: u64,
}

impl PurgePlan {
    /// What would be removed, per owner.
    pub fn per_user(&self) -> BTreeMap<u32, Tally> {
        tally(&self.delete)
    }

    /// What passes the limit soon, per owner.
    pub fn warned_per_user(&self) -> BTreeMap<u32, Vec<&Candidate>> {
        let mut out: BTreeMap<u32, Vec<&Candidate>> = BTreeMap::new();
        for c in &self.warn {
            out.entry(c.uid).or_default().push(c);
        }
        out
    }

    /// Everything to be removed.
    pub fn total(&self) -> Tally {
        self.delete.iter().fold(Tally::default(), |t, c| Tally {
            files: t.files + 1,
            bytes: t.bytes + c.bytes,
        })
    }

    /// When a warned entry will pass the limit, seconds since the epoch.
    pub fn due(&self, c: &Candidate) -> i64 {
        c.touched + self.max_age_secs as i64
    }
}

fn tally(list: &[Candidate]) -> BTreeMap<u32, Tally> {
    let mut out: BTreeMap<u32, Tally> = BTreeMap::new();
    for c in list {
        let t = out.entry(c.uid).or_default();
        t.files += 1;
        t.bytes += c.bytes;
    }
    out
}

/// The newest time that counts, in seconds.
fn touched(s: &FileStat, atime_counted: bool) -> i64 {
    let newest = s.st_mtime.max(s.st_ctime);
    if atime_counted {
        newest.max(s.st_atime)
    } else {
        newest
    }
}

fn protected_ids(protected: &[PathBuf]) -> HashSet<(u64, u64)> {
    protected
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        })
        .collect()
}

fn has_marker(children: &[Child]) -> bool {
    children.iter().any(|c| c.name == OsStr::new(KEEP_MARKER))
}

/// Makes the plan: walks `root` and lists what is past `policy.max_age` and what passes it
/// within `policy.warn`.
pub fn plan(
    root: &Path,
    policy: &PurgePolicy,
    ctx: &PurgeContext,
    progress: &Progress,
) -> Result<PurgePlan, QuotaError> {
    let root = std::fs::canonicalize(root).map_err(|e| QuotaError::io(root, e))?;
    let mounts = Mounts::read();
    let mount = mounts.containing(&root);
    let atime_counted = crate::mounts::atime_kept(mount);
    let atime_note = (!atime_counted).then(|| {
        format!(
            "{} is mounted noatime ({}): reading a file does not change its age; ages come from mtime and ctime only",
            root.display(),
            mount.map_or_else(String::new, |m| m.point.display().to_string())
        )
    });
    let max_age = policy.max_age.as_secs() as i64;
    let warn_from = max_age - policy.warn.as_secs() as i64;
    let guard = protected_ids(&ctx.protected);
    struct Found {
        delete: Vec<Candidate>,
        warn: Vec<Candidate>,
        kept: Vec<PathBuf>,
        jobs: Vec<PathBuf>,
    }
    let found = Mutex::new(Found {
        delete: Vec::new(),
        warn: Vec::new(),
        kept: Vec::new(),
        jobs: Vec::new(),
    });
    let outcome = walk(
        &root,
        policy.threads,
        |dir: &DirVisit, children: &[Child]| {
            Progress::add(&progress.entries, children.len() as u64);
            if guard.contains(&(dir.stat.st_dev, dir.stat.st_ino)) {
                if let Ok(mut f) = found.lock() {
                    f.jobs.push(root.join(dir.rel));
                }
                return false;
            }
            if has_marker(children) {
                if let Ok(mut f) = found.lock() {
                    f.kept.push(root.join(dir.rel));
                }
                return false;
            }
            let mut delete = Vec::new();
            let mut warn = Vec::new();
            for c in children.iter().filter(|c| !c.is_dir()) {
                let t = touched(&c.stat, atime_counted);
                let age = ctx.now - t;
                if age < warn_from {
                    continue;
                }
                let cand = Candidate {
                    path: dir.rel.join(&c.name),
                    uid: c.stat.st_uid,
                    bytes: c.stat.st_blocks as u64 * 512,
                    touched: t,
                    dev: c.stat.st_dev,
                    ino: c.stat.st_ino,
                    symlink: kind(&c.stat) == libc::S_IFLNK,
                };
                if age >= max_age {
                    delete.push(cand);
                } else {
                    warn.push(cand);
                }
            }
            if (!delete.is_empty() || !warn.is_empty())
                && let Ok(mut f) = found.lock()
            {
                f.delete.extend(delete);
                f.warn.extend(warn);
            }
            true
        },
    )?;
    let mut f = found.into_inner().unwrap_or_else(|p| p.into_inner());
    f.delete
        .sort_by(|a, b| a.touched.cmp(&b.touched).then_with(|| a.path.cmp(&b.path)));
    f.warn
        .sort_by(|a, b| a.touched.cmp(&b.touched).then_with(|| a.path.cmp(&b.path)));
    f.kept.sort();
    f.jobs.sort();
    let mut errors = outcome.errors;
    errors.sort();
    Ok(PurgePlan {
        root,
        made: ctx.now,
        max_age_secs: max_age as u64,
        warn_secs: policy.warn.as_secs(),
        atime_counted,
        atime_note,
        delete: f.delete,
        warn: f.warn,
        kept: f.kept,
        jobs_skipped: f.jobs,
        mounts_skipped: outcome.mounts_skipped,
        errors,
    })
}

/// One entry removed, as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// When, seconds since the epoch.
    pub time: i64,
    /// Its absolute path.
    pub path: PathBuf,
    /// Owner.
    pub uid: u32,
    /// Allocated bytes freed.
    pub bytes: u64,
    /// Its age, whole days.
    pub age_days: i64,
    /// Whether it was a symlink.
    pub symlink: bool,
}

/// What an execution did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PurgeOutcome {
    /// Removed, in the order they went.
    pub removed: Vec<Removed>,
    /// Planned but left, with why (touched since, replaced, now kept, gone).
    pub skipped: Vec<(PathBuf, String)>,
}

impl PurgeOutcome {
    /// Removed entries and bytes, per owner.
    pub fn per_user(&self) -> BTreeMap<u32, Tally> {
        let mut out: BTreeMap<u32, Tally> = BTreeMap::new();
        for r in &self.removed {
            let t = out.entry(r.uid).or_default();
            t.files += 1;
            t.bytes += r.bytes;
        }
        out
    }
}

/// Opens the directory `rel` below `root_fd` one component at a time, refusing symlinks,
/// mounts, protected directories and directories holding the keep marker on the way.
fn open_dir(
    root_fd: &OwnedFd,
    root_stat: &FileStat,
    rel: &Path,
    guard: &HashSet<(u64, u64)>,
    mounts: &BTreeSet<PathBuf>,
    root: &Path,
) -> Result<OwnedFd, String> {
    let check = |fd: &OwnedFd, st: &FileStat| -> Result<(), String> {
        if guard.contains(&(st.st_dev, st.st_ino)) {
            return Err("in a running job's working directory".into());
        }
        match fstatat(fd, KEEP_MARKER, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(_) => Err(format!("under a {KEEP_MARKER} marker")),
            Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(format!("cannot check for {KEEP_MARKER}: {e}")),
        }
    };
    check(root_fd, root_stat)?;
    let mut fd = root_fd.try_clone().map_err(|e| e.to_string())?;
    let mut stat = *root_stat;
    let mut here = root.to_path_buf();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(format!("bad path component {c:?}"));
        };
        here.push(name);
        let next = openat(&fd, name, dir_flags(), Mode::empty()).map_err(|e| match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
                "a directory on its path is now a symlink or a file; not followed".to_string()
            }
            e => format!("cannot open {}: {e}", here.display()),
        })?;
        let st = fstat(&next).map_err(|e| e.to_string())?;
        if mounts.contains(&here) || (st.st_dev != stat.st_dev && st.st_ino != BTRFS_SUBVOLUME_INO)
        {
            return Err("a directory on its path is now a mount point".into());
        }
        check(&next, &st)?;
        fd = next;
        stat = st;
    }
    Ok(fd)
}

/// Executes `plan`: removes each planned entry that is still the same inode and still past the
/// age limit at `ctx.now`, writing one JSON line per removal to `audit` as it goes.
pub fn execute(
    plan: &PurgePlan,
    ctx: &PurgeContext,
    audit: &mut dyn Write,
    progress: &Progress,
) -> Result<PurgeOutcome, QuotaError> {
    let root = &plan.root;
    let (root_fd, root_stat) = open_root(root)?;
    let mounts = Mounts::read().points_under(root);
    let guard = protected_ids(&ctx.protected);
    let mut by_dir: BTreeMap<PathBuf, Vec<&Candidate>> = BTreeMap::new();
    for c in &plan.delete {
        let parent = c.path.parent().unwrap_or(Path::new("")).to_path_buf();
        by_dir.entry(parent).or_default().push(c);
    }
    let mut outcome = PurgeOutcome::default();
    for (dir, entries) in by_dir {
        let dfd = match open_dir(&root_fd, &root_stat, &dir, &guard, &mounts, root) {
            Ok(fd) => fd,
            Err(why) => {
                for c in entries {
                    outcome.skipped.push((root.join(&c.path), why.clone()));
                }
                continue;
            }
        };
        for c in entries {
            let abs = root.join(&c.path);
            let name = c.path.file_name().unwrap_or_default();
            match remove_one(&dfd, name, c, plan, ctx) {
                Ok(removed) => {
                    let removed = Removed {
                        path: abs,
                        ..removed
                    };
                    let line = serde_json::to_string(&removed).unwrap_or_default();
                    writeln!(audit, "{line}").map_err(|e| QuotaError::io("purge audit log", e))?;
                    Progress::add(&progress.removed, 1);
                    Progress::add(&progress.bytes, removed.bytes);
                    outcome.removed.push(removed);
                }
                Err(why) => outcome.skipped.push((abs, why)),
            }
            Progress::add(&progress.entries, 1);
        }
    }
    audit
        .flush()
        .map_err(|e| QuotaError::io("purge audit log", e))?;
    Ok(outcome)
}

/// Checks one entry on its own descriptor, then unlinks it from `dir`.
fn remove_one(
    dir: &OwnedFd,
    name: &OsStr,
    c: &Candidate,
    plan: &PurgePlan,
    ctx: &PurgeContext,
) -> Result<Removed, String> {
    let fd = openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        nix::errno::Errno::ENOENT => "gone since the plan".to_string(),
        e => format!("cannot open: {e}"),
    })?;
    let st = fstat(&fd).map_err(|e| format!("cannot stat: {e}"))?;
    if (st.st_dev, st.st_ino) != (c.dev, c.ino) {
        return Err(
            "replaced since the plan (another file or a link now has its name); left alone".into(),
        );
    }
    if kind(&st) == libc::S_IFDIR {
        return Err("is a directory now; left alone".into());
    }
    // A recycled inode number can make a new entry look like the planned one; its type can
    // still tell them apart.
    if (kind(&st) == libc::S_IFLNK) != c.symlink {
        return Err(
            "changed type since the plan (a file became a link, or back); left alone".into(),
        );
    }
    let t = touched(&st, plan.atime_counted);
    let age = ctx.now - t;
    if age < plan.max_age_secs as i64 {
        return Err(format!(
            "used since the plan ({} days old now); kept",
            age.max(0) / 86_400
        ));
    }
    unlinkat(dir, name, UnlinkatFlags::NoRemoveDir).map_err(|e| format!("cannot remove: {e}"))?;
    Ok(Removed {
        time: ctx.now,
        path: PathBuf::new(),
        uid: st.st_uid,
        bytes: st.st_blocks as u64 * 512,
        age_days: age / 86_400,
        symlink: kind(&st) == libc::S_IFLNK,
    })
}
