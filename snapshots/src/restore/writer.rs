//! Writing a node of a snapshot into an open directory: files (sparse where the data has holes,
//! hard links re-created as links), directories (children in parallel), links, pipes and
//! devices, each with its mode, owner and mtime, and never through a symlink.

use super::{RestoreOptions, RestoreReport, meta_for, open_subdir, owner_of};
use crate::blob::BlobId;
use crate::error::{Result, SnapshotError};
use crate::progress::Progress;
use crate::repo::Repository;
use crate::tree::{Node, NodeKind};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{
    FchmodatFlags, Mode, SFlag, UtimensatFlags, fchmodat, fstatat, mkdirat, mknodat, utimensat,
};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchownat, linkat, symlinkat, unlinkat};
use rayon::prelude::*;
use std::collections::HashMap;
use std::fs::{File, FileTimes, Permissions};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

/// Restores `node` as `name` inside the open directory `dest`. `display` is the destination's
/// path, for messages.
pub fn restore_node(
    repo: &Repository,
    node: &Node,
    dest: &OwnedFd,
    display: &Path,
    opts: &RestoreOptions,
    progress: &Progress,
) -> Result<RestoreReport> {
    if let Some(uid) = opts.only_uid
        && node.uid != uid
    {
        return Err(SnapshotError::NotYours {
            path: display.join(node.display_name()).display().to_string(),
            owner: node.uid,
            caller: uid,
            snapshot: String::new(),
        });
    }
    let top = display.join(std::ffi::OsStr::from_bytes(&node.name));
    if !opts.overwrite && exists(dest, &node.name) {
        return Err(SnapshotError::TargetExists { path: top });
    }
    Progress::add(
        &progress.total_bytes,
        total_bytes(repo, node, opts.only_uid)?,
    );
    let r = Restorer {
        repo,
        opts,
        progress,
        links: Mutex::new(HashMap::new()),
        report: Mutex::new(RestoreReport {
            restored_to: top,
            ..Default::default()
        }),
    };
    r.put(dest, node, display)?;
    Ok(r.report.into_inner().unwrap())
}

/// Bytes of file content under `node` that a restore would write.
pub fn total_bytes(repo: &Repository, node: &Node, only_uid: Option<u32>) -> Result<u64> {
    if only_uid.is_some_and(|u| u != node.uid) {
        return Ok(0);
    }
    Ok(match (node.kind, node.subtree) {
        (NodeKind::File, _) => node.size,
        (NodeKind::Dir, Some(t)) => {
            let tree = repo.load_tree(&t)?;
            let mut sum = 0;
            for n in &tree.nodes {
                sum += total_bytes(repo, n, only_uid)?;
            }
            sum
        }
        _ => 0,
    })
}

fn exists(dir: &OwnedFd, name: &[u8]) -> bool {
    fstatat(
        dir,
        std::ffi::OsStr::from_bytes(name),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .is_ok()
}

type LinkSlot = Arc<Mutex<Option<File>>>;

struct Restorer<'a> {
    repo: &'a Repository,
    opts: &'a RestoreOptions,
    progress: &'a Progress,
    /// The first restored copy of each hard-linked inode, kept open so later links point at it
    /// through /proc/self/fd (never through a path someone could swap).
    links: Mutex<HashMap<(u64, u64), LinkSlot>>,
    report: Mutex<RestoreReport>,
}

impl Restorer<'_> {
    fn fail(&self, path: &Path, why: impl std::fmt::Display) {
        Progress::add(&self.progress.errors, 1);
        self.report
            .lock()
            .unwrap()
            .failed
            .push(format!("{}: {why}", path.display()));
    }

    /// Restores `node` into `dir` (shown as `at`). Errors of one entry are recorded and the
    /// rest goes on; only repository-level failures stop the restore.
    fn put(&self, dir: &OwnedFd, node: &Node, at: &Path) -> Result<()> {
        let name = std::ffi::OsStr::from_bytes(&node.name);
        let path = at.join(name);
        if self.opts.only_uid.is_some_and(|u| u != node.uid) {
            self.report.lock().unwrap().skipped_not_owned += 1;
            return Ok(());
        }
        Progress::add(&self.progress.entries, 1);
        if let Err(e) = self.clear_way(dir, node, &path) {
            self.fail(&path, e);
            return Ok(());
        }
        match node.kind {
            NodeKind::Dir => self.dir(dir, node, &path),
            NodeKind::File => {
                if let Err(e) = self.file(dir, node) {
                    let _ = unlinkat(dir, name, UnlinkatFlags::NoRemoveDir);
                    self.fail(&path, e);
                }
                Ok(())
            }
            NodeKind::Socket => {
                self.fail(&path, "a socket is not restored (its server recreates it)");
                Ok(())
            }
            NodeKind::CharDevice | NodeKind::BlockDevice if self.opts.only_uid.is_some() => {
                self.fail(&path, "device nodes are restored by admins only");
                Ok(())
            }
            _ => {
                if let Err(e) = self.special(dir, node) {
                    self.fail(&path, e);
                } else {
                    self.report.lock().unwrap().others += 1;
                }
                Ok(())
            }
        }
    }

    /// With `--overwrite`, removes a non-directory in the way (never following it). A
    /// directory in the way of a directory is merged into; in the way of a file, it is an error.
    fn clear_way(
        &self,
        dir: &OwnedFd,
        node: &Node,
        path: &Path,
    ) -> std::result::Result<(), String> {
        let name = std::ffi::OsStr::from_bytes(&node.name);
        let Ok(st) = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
            return Ok(());
        };
        let is_dir = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
        if !self.opts.overwrite {
            return Err(SnapshotError::TargetExists {
                path: path.to_path_buf(),
            }
            .to_string());
        }
        if is_dir {
            if node.kind == NodeKind::Dir {
                return Ok(());
            }
            return Err("a directory is in the way; move it aside or restore with --target".into());
        }
        unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)
            .map_err(|e| format!("cannot replace it: {e}"))
    }

    fn dir(&self, parent: &OwnedFd, node: &Node, path: &Path) -> Result<()> {
        let name = std::ffi::OsStr::from_bytes(&node.name);
        let existed = match mkdirat(parent, name, Mode::from_bits_truncate(0o700)) {
            Ok(()) => false,
            Err(Errno::EEXIST) => true,
            Err(e) => {
                self.fail(path, e);
                return Ok(());
            }
        };
        let fd = match open_subdir(parent, name, !existed) {
            Ok(fd) => fd,
            Err(e) => {
                self.fail(path, e);
                return Ok(());
            }
        };
        // A member's --overwrite merges only into directories of theirs: it must not change
        // what is inside someone else's directory, which they could not do themselves.
        if existed && let Some(uid) = self.opts.only_uid {
            match owner_of(&fd) {
                Ok(owner) if owner == uid => {}
                Ok(owner) => {
                    self.fail(path, format!("a directory of uid {owner} is in the way; a restore merges only into directories of yours"));
                    return Ok(());
                }
                Err(e) => {
                    self.fail(path, e);
                    return Ok(());
                }
            }
        }
        self.report.lock().unwrap().dirs += 1;
        if let Some(t) = node.subtree {
            let tree = self.repo.load_tree(&t)?;
            tree.nodes
                .par_iter()
                .map(|child| self.put(&fd, child, path))
                .collect::<Result<Vec<()>>>()?;
        }
        let f = File::from(fd);
        if let Err(e) = self.set_meta(&f, node) {
            self.fail(path, e);
        }
        Ok(())
    }

    fn set_meta(&self, f: &File, node: &Node) -> std::io::Result<()> {
        let (uid, gid, mode) = meta_for(self.opts, node);
        if self.opts.set_owner {
            std::os::unix::fs::fchown(f, Some(uid), Some(gid))?;
        }
        f.set_permissions(Permissions::from_mode(mode))?;
        f.set_times(FileTimes::new().set_modified(to_time(node.mtime_ns)))
    }

    fn file(&self, dir: &OwnedFd, node: &Node) -> std::result::Result<(), String> {
        let name = std::ffi::OsStr::from_bytes(&node.name);
        let slot = node.is_hard_linked().then(|| {
            self.links
                .lock()
                .unwrap()
                .entry((node.dev, node.inode))
                .or_default()
                .clone()
        });
        let mut guard = slot.as_ref().map(|s| s.lock().unwrap());
        if let Some(Some(first)) = guard.as_deref() {
            let proc = format!("/proc/self/fd/{}", first.as_raw_fd());
            linkat(
                nix::fcntl::AT_FDCWD,
                proc.as_str(),
                dir,
                name,
                AtFlags::AT_SYMLINK_FOLLOW,
            )
            .map_err(|e| format!("cannot re-create the hard link: {e}"))?;
            self.report.lock().unwrap().others += 1;
            return Ok(());
        }
        let fd = openat(
            dir,
            name,
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| e.to_string())?;
        let f = File::from(fd);
        let mut offset = 0u64;
        for id in &node.content {
            let data = self.read(id)?;
            write_sparse(&f, &data, offset).map_err(|e| e.to_string())?;
            offset += data.len() as u64;
            Progress::add(&self.progress.bytes, data.len() as u64);
        }
        f.set_len(offset).map_err(|e| e.to_string())?;
        self.set_meta(&f, node).map_err(|e| e.to_string())?;
        {
            let mut r = self.report.lock().unwrap();
            r.files += 1;
            r.bytes += offset;
        }
        if let Some(g) = guard.as_mut() {
            **g = Some(f);
        }
        Ok(())
    }

    fn read(&self, id: &BlobId) -> std::result::Result<Vec<u8>, String> {
        self.repo.read_blob(id).map_err(|e| e.to_string())
    }

    fn special(&self, dir: &OwnedFd, node: &Node) -> std::result::Result<(), String> {
        let name = std::ffi::OsStr::from_bytes(&node.name);
        let s = |e: Errno| e.to_string();
        if node.kind == NodeKind::Symlink {
            symlinkat(std::ffi::OsStr::from_bytes(&node.target), dir, name).map_err(s)?;
        } else {
            let kind = match node.kind {
                NodeKind::Fifo => SFlag::S_IFIFO,
                NodeKind::CharDevice => SFlag::S_IFCHR,
                _ => SFlag::S_IFBLK,
            };
            mknodat(dir, name, kind, Mode::from_bits_truncate(0o600), node.rdev).map_err(s)?;
        }
        let (uid, gid, mode) = meta_for(self.opts, node);
        if self.opts.set_owner {
            fchownat(
                dir,
                name,
                Some(Uid::from_raw(uid)),
                Some(Gid::from_raw(gid)),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map_err(s)?;
        }
        if node.kind != NodeKind::Symlink {
            fchmodat(
                dir,
                name,
                Mode::from_bits_truncate(mode),
                FchmodatFlags::NoFollowSymlink,
            )
            .map_err(s)?;
        }
        let t = TimeSpec::from(Duration::from_nanos(node.mtime_ns.max(0) as u64));
        utimensat(dir, name, &t, &t, UtimensatFlags::NoFollowSymlink).map_err(s)?;
        Ok(())
    }
}

/// Writes `data` at `offset`, leaving 4 KiB blocks of zeros as holes (the file's length is set
/// afterwards), so sparse files come back sparse.
fn write_sparse(f: &File, data: &[u8], offset: u64) -> std::io::Result<()> {
    const BLOCK: usize = 4096;
    static ZEROS: [u8; BLOCK] = [0; BLOCK];
    let mut run_start = None;
    let mut pos = 0;
    while pos < data.len() {
        let end = (pos + BLOCK).min(data.len());
        let zero = data[pos..end] == ZEROS[..end - pos];
        match (zero, run_start) {
            (false, None) => run_start = Some(pos),
            (true, Some(s)) => {
                f.write_all_at(&data[s..pos], offset + s as u64)?;
                run_start = None;
            }
            _ => {}
        }
        pos = end;
    }
    if let Some(s) = run_start {
        f.write_all_at(&data[s..], offset + s as u64)?;
    }
    Ok(())
}

fn to_time(ns: i64) -> std::time::SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}
