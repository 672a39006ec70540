//! A parallel walk through directory file descriptors: every directory is opened relative to
//! its parent's descriptor with `O_NOFOLLOW`, every entry is `fstatat`'d without following,
//! and mounts are never entered. A directory renamed or replaced by a symlink mid-walk is
//! skipped, never followed out of the tree.

use crate::QuotaError;
use crate::mounts::Mounts;
use nix::dir::Dir;
use nix::fcntl::AtFlags;
use nix::fcntl::{OFlag, openat};
use nix::libc;
use nix::sys::stat::{FileStat, Mode, fstat, fstatat};
use std::collections::BTreeSet;
use std::ffi::{CStr, OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The inode number of a btrfs subvolume's root directory: a subvolume has its own device
/// number but is not a mount, so the walk goes on into it.
pub(crate) const BTRFS_SUBVOLUME_INO: u64 = 256;

/// Flags that open a directory without following a symlink in its place.
pub(crate) fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// A directory being visited.
pub(crate) struct DirVisit<'a> {
    /// Its descriptor.
    pub fd: &'a OwnedFd,
    /// Its path relative to the walk's root (empty for the root).
    pub rel: &'a Path,
    /// Its depth (0 for the root).
    pub depth: usize,
    /// Its own status.
    pub stat: &'a FileStat,
}

/// An entry of a directory, not followed.
pub(crate) struct Child {
    /// Its name.
    pub name: OsString,
    /// Its status (`lstat`).
    pub stat: FileStat,
}

impl Child {
    /// Whether it is a directory (not a link to one).
    pub fn is_dir(&self) -> bool {
        kind(&self.stat) == libc::S_IFDIR
    }
}

/// The file-type bits of a status (`S_IFDIR`, `S_IFREG`, `S_IFLNK`...).
pub(crate) fn kind(stat: &FileStat) -> u32 {
    stat.st_mode & libc::S_IFMT
}

/// What a walk met but did not count.
#[derive(Debug, Default)]
pub(crate) struct WalkOutcome {
    /// Mount points left alone.
    pub mounts_skipped: Vec<PathBuf>,
    /// Entries that could not be read (absolute paths), with why.
    pub errors: Vec<(PathBuf, String)>,
}

/// Opens `root` as the walk's start: a directory, not a symlink.
pub(crate) fn open_root(root: &Path) -> Result<(OwnedFd, FileStat), QuotaError> {
    let fd = nix::fcntl::open(root, dir_flags(), Mode::empty()).map_err(|e| {
        if e == nix::errno::Errno::ELOOP || e == nix::errno::Errno::ENOTDIR {
            QuotaError::NotADirectory {
                path: root.to_path_buf(),
                why: "a symlink or a file; give the real directory".to_string(),
            }
        } else {
            QuotaError::io(root, e)
        }
    })?;
    let stat = fstat(&fd).map_err(|e| QuotaError::io(root, e))?;
    Ok((fd, stat))
}

/// Walks the tree under `root` on `threads` threads. `visit` is called once per directory with
/// its entries and returns whether to go into its subdirectories (`false` skips the whole
/// subtree below it). Mount points are never entered: those in the mount table, and any
/// directory on another device that is not a btrfs subvolume.
pub(crate) fn walk<V>(root: &Path, threads: usize, visit: V) -> Result<WalkOutcome, QuotaError>
where
    V: Fn(&DirVisit, &[Child]) -> bool + Sync,
{
    let canonical = std::fs::canonicalize(root).map_err(|e| QuotaError::io(root, e))?;
    let mounts = Mounts::read().points_under(&canonical);
    let (fd, stat) = open_root(root)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| QuotaError::io(root, std::io::Error::other(e)))?;
    let outcome = Mutex::new(WalkOutcome::default());
    let ctx = Ctx {
        canonical: &canonical,
        mounts: &mounts,
        visit: &visit,
        outcome: &outcome,
    };
    pool.scope(|s| {
        ctx.dir(s, Arc::new(fd), stat, PathBuf::new(), 0);
    });
    Ok(outcome.into_inner().unwrap_or_else(|p| p.into_inner()))
}

struct Ctx<'a, V> {
    canonical: &'a Path,
    mounts: &'a BTreeSet<PathBuf>,
    visit: &'a V,
    outcome: &'a Mutex<WalkOutcome>,
}

impl<'a, V> Ctx<'a, V>
where
    V: Fn(&DirVisit, &[Child]) -> bool + Sync,
{
    /// A mount point: in the mount table, or on another device and not a btrfs subvolume.
    fn is_mount(&self, rel: &Path, child: &Child, parent: &FileStat) -> bool {
        self.mounts
            .contains(&self.canonical.join(rel).join(&child.name))
            || (child.stat.st_dev != parent.st_dev && child.stat.st_ino != BTRFS_SUBVOLUME_INO)
    }

    fn error(&self, rel: &Path, e: impl std::fmt::Display) {
        if let Ok(mut o) = self.outcome.lock() {
            o.errors.push((self.canonical.join(rel), e.to_string()));
        }
    }

    fn dir<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        fd: Arc<OwnedFd>,
        stat: FileStat,
        rel: PathBuf,
        depth: usize,
    ) where
        'a: 's,
    {
        let children = match read_children(&fd) {
            Ok(c) => c,
            Err((name, e)) => {
                self.error(&rel.join(name), e);
                return;
            }
        };
        let (children, errors): (Vec<_>, Vec<_>) = children.into_iter().partition(Result::is_ok);
        for e in errors {
            // An entry deleted while the walk ran is not an error.
            if let Err((name, e)) = e
                && e != nix::errno::Errno::ENOENT
            {
                self.error(&rel.join(name), e);
            }
        }
        let (mounts, children): (Vec<Child>, Vec<Child>) = children
            .into_iter()
            .filter_map(Result::ok)
            .partition(|c| c.is_dir() && self.is_mount(&rel, c, &stat));
        if !mounts.is_empty()
            && let Ok(mut o) = self.outcome.lock()
        {
            o.mounts_skipped.extend(
                mounts
                    .iter()
                    .map(|m| self.canonical.join(&rel).join(&m.name)),
            );
        }
        let visit = DirVisit {
            fd: &fd,
            rel: &rel,
            depth,
            stat: &stat,
        };
        if !(self.visit)(&visit, &children) {
            return;
        }
        for child in children.into_iter().filter(Child::is_dir) {
            let child_rel = rel.join(&child.name);
            let parent = fd.clone();
            scope.spawn(move |s| {
                match openat(&*parent, child.name.as_os_str(), dir_flags(), Mode::empty()) {
                    Ok(cfd) => {
                        drop(parent);
                        // The same directory as listed, or it was swapped: skip it.
                        match fstat(&cfd) {
                            Ok(now)
                                if now.st_ino == child.stat.st_ino
                                    && now.st_dev == child.stat.st_dev =>
                            {
                                self.dir(s, Arc::new(cfd), now, child_rel, depth + 1)
                            }
                            Ok(_) => self.error(&child_rel, "replaced during the walk; skipped"),
                            Err(e) => self.error(&child_rel, e),
                        }
                    }
                    Err(nix::errno::Errno::ENOENT) => {}
                    Err(e) => self.error(&child_rel, e),
                }
            });
        }
    }
}

type ChildResult = Result<Child, (OsString, nix::errno::Errno)>;

/// Lists a directory and `lstat`s each entry through its descriptor.
fn read_children(fd: &OwnedFd) -> Result<Vec<ChildResult>, (OsString, nix::errno::Errno)> {
    let dup = fd.try_clone().map_err(|e| {
        (
            OsString::new(),
            nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)),
        )
    })?;
    let mut dir = Dir::from_fd(dup).map_err(|e| (OsString::new(), e))?;
    let mut out = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| (OsString::new(), e))?;
        let name: &CStr = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let os = OsStr::from_bytes(bytes).to_os_string();
        out.push(
            fstatat(fd, name, AtFlags::AT_SYMLINK_NOFOLLOW)
                .map(|stat| Child {
                    name: os.clone(),
                    stat,
                })
                .map_err(|e| (os, e)),
        );
    }
    Ok(out)
}
