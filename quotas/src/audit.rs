//! The read-only datasets audit: no file or directory under a dataset may be writable by a
//! member. An entry offends when it is writable by others, writable by a group that is not
//! trusted, or owned by a user who is not trusted (an owner can always make it writable
//! again). Trusted are root and the admins. The fix takes the write bits off and gives
//! member-owned entries to root (the group is kept). Symlinks have no mode of their own and
//! are not judged; device nodes are reported but never opened to be fixed.

use crate::walk::{Child, DirVisit, kind, walk};
use crate::{Progress, QuotaError};
use nix::fcntl::{OFlag, openat};
use nix::libc;
use nix::sys::stat::{FileStat, Mode, fchmod, fstat};
use nix::unistd::{Uid, fchown};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Who may own and write dataset files.
#[derive(Debug, Clone, Default)]
pub struct Trusted {
    /// Trusted owners (root is always trusted).
    pub uids: BTreeSet<u32>,
    /// Trusted groups (root's group is always trusted).
    pub gids: BTreeSet<u32>,
}

impl Trusted {
    fn uid(&self, uid: u32) -> bool {
        uid == 0 || self.uids.contains(&uid)
    }

    fn gid(&self, gid: u32) -> bool {
        gid == 0 || self.gids.contains(&gid)
    }
}

/// An entry members could write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offender {
    /// Its absolute path.
    pub path: PathBuf,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Permission bits, as found.
    pub mode: u32,
    /// Why: `world-writable`, `group-writable`, `member-owned`.
    pub why: Vec<String>,
    /// Whether `--fix` fixed it.
    pub fixed: bool,
    /// Why the fix failed, if it did.
    pub fix_error: Option<String>,
}

/// What an audit found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuditReport {
    /// The roots audited.
    pub roots: Vec<PathBuf>,
    /// Entries checked.
    pub checked: u64,
    /// Offenders, by path.
    pub offenders: Vec<Offender>,
    /// Entries that could not be read.
    pub errors: Vec<(PathBuf, String)>,
}

fn judge(stat: &FileStat, trusted: &Trusted) -> Vec<String> {
    let mut why = Vec::new();
    if kind(stat) == libc::S_IFLNK {
        return why;
    }
    if stat.st_mode & 0o002 != 0 {
        why.push("world-writable".to_string());
    }
    if stat.st_mode & 0o020 != 0 && !trusted.gid(stat.st_gid) {
        why.push("group-writable".to_string());
    }
    if !trusted.uid(stat.st_uid) {
        why.push("member-owned".to_string());
    }
    why
}

/// Fixes one entry through a descriptor opened without following links, checked to be the
/// same inode that was judged.
fn fix(fd: &OwnedFd, stat: &FileStat, trusted: &Trusted) -> Result<(), String> {
    let now = fstat(fd).map_err(|e| e.to_string())?;
    if (now.st_dev, now.st_ino) != (stat.st_dev, stat.st_ino) {
        return Err("replaced during the audit".into());
    }
    if !trusted.uid(now.st_uid) {
        fchown(fd, Some(Uid::from_raw(0)), None).map_err(|e| format!("chown: {e}"))?;
    }
    let mut mode = now.st_mode & 0o7777 & !0o002;
    if !trusted.gid(now.st_gid) {
        mode &= !0o020;
    }
    fchmod(fd, Mode::from_bits_truncate(mode)).map_err(|e| format!("chmod: {e}"))
}

fn open_entry(dir: &OwnedFd, name: &std::ffi::OsStr, stat: &FileStat) -> Result<OwnedFd, String> {
    let flags = match kind(stat) {
        libc::S_IFDIR => crate::walk::dir_flags(),
        libc::S_IFREG => OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        _ => return Err("not a regular file or directory: fix it by hand".into()),
    };
    openat(dir, name, flags, Mode::empty()).map_err(|e| e.to_string())
}

/// Audits every root (each a dataset, or the datasets root); with `fix`, fixes what it finds.
pub fn audit(
    roots: &[PathBuf],
    trusted: &Trusted,
    fix_them: bool,
    threads: usize,
    progress: &Progress,
) -> Result<AuditReport, QuotaError> {
    let mut report = AuditReport::default();
    for root in roots {
        let root = std::fs::canonicalize(root).map_err(|e| QuotaError::io(root, e))?;
        let found = Mutex::new(Vec::new());
        let checked = std::sync::atomic::AtomicU64::new(0);
        let outcome = walk(&root, threads, |dir: &DirVisit, children: &[Child]| {
            let mut local = Vec::new();
            if dir.depth == 0 {
                let why = judge(dir.stat, trusted);
                if !why.is_empty() {
                    let mut o = offender(&root, Path::new(""), dir.stat, why);
                    if fix_them {
                        let r = fix(dir.fd, dir.stat, trusted);
                        o.fixed = r.is_ok();
                        o.fix_error = r.err();
                    }
                    local.push(o);
                }
            }
            for c in children {
                let why = judge(&c.stat, trusted);
                if why.is_empty() {
                    continue;
                }
                let mut o = offender(&root, &dir.rel.join(&c.name), &c.stat, why);
                if fix_them {
                    let r = open_entry(dir.fd, &c.name, &c.stat)
                        .and_then(|fd| fix(&fd, &c.stat, trusted));
                    o.fixed = r.is_ok();
                    o.fix_error = r.err();
                }
                local.push(o);
            }
            let n = children.len() as u64 + u64::from(dir.depth == 0);
            checked.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            Progress::add(&progress.entries, n);
            if !local.is_empty()
                && let Ok(mut f) = found.lock()
            {
                f.extend(local);
            }
            true
        })?;
        report.checked += checked.into_inner();
        report
            .offenders
            .extend(found.into_inner().unwrap_or_else(|p| p.into_inner()));
        report
            .errors
            .extend(outcome.errors.into_iter().map(|(p, e)| (root.join(p), e)));
        report.roots.push(root);
    }
    report.offenders.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report)
}

fn offender(root: &Path, rel: &Path, stat: &FileStat, why: Vec<String>) -> Offender {
    Offender {
        path: root.join(rel),
        uid: stat.st_uid,
        gid: stat.st_gid,
        mode: stat.st_mode & 0o7777,
        why,
        fixed: false,
        fix_error: None,
    }
}
