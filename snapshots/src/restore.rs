//! `restore`: writes a node of a snapshot (a file or a whole directory) back to disk, with mode,
//! owner and mtime.
//!
//! Every path is created relative to an open directory descriptor, with `O_NOFOLLOW` and
//! `O_EXCL`, so neither a symlink planted in the target nor a forged name in the repository can
//! make a restore write outside its target. Hard links are re-created as hard links; runs of
//! zeros become holes again, so sparse files stay sparse.

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
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

/// How to restore.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Replace what exists at the destination (files are replaced; directories are merged into).
    pub overwrite: bool,
    /// Restore only entries this uid owned in the snapshot (a member's restore); `None` restores
    /// everything (root or an admin).
    pub only_uid: Option<u32>,
    /// Give restored entries their owner from the snapshot (needs root). Otherwise they belong
    /// to the restoring process.
    pub set_owner: bool,
    /// For a member's restore, the groups they are in now, primary first: an entry whose group
    /// they have left gets their primary group instead, without its setgid bit, so a restore
    /// never hands back a group's rights. `None`: groups as in the snapshot.
    pub member_groups: Option<Vec<u32>>,
}

/// The owner, group and mode an entry is restored with under `opts`.
fn meta_for(opts: &RestoreOptions, node: &Node) -> (u32, u32, u32) {
    match &opts.member_groups {
        Some(groups) if !groups.contains(&node.gid) => {
            let primary = groups.first().copied().unwrap_or(node.gid);
            (node.uid, primary, node.mode & !0o2000)
        }
        _ => (node.uid, node.gid, node.mode),
    }
}

/// What a restore did.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct RestoreReport {
    /// Where the restored entry now is.
    pub restored_to: PathBuf,
    /// Regular files written.
    pub files: u64,
    /// Directories created or merged into.
    pub dirs: u64,
    /// Other entries (links, pipes, devices).
    pub others: u64,
    /// Content bytes written.
    pub bytes: u64,
    /// Entries left out because the caller did not own them.
    pub skipped_not_owned: u64,
    /// Entries that could not be restored, with why (damaged data among them).
    pub failed: Vec<String>,
}

/// Opens the existing directory `path` (absolute, no `..`) one component at a time without
/// following any symlink.
pub fn open_dir_nofollow(path: &Path) -> Result<OwnedFd> {
    let bad = |why: String| SnapshotError::BadTarget {
        path: path.to_path_buf(),
        why,
    };
    if !path.is_absolute() {
        return Err(bad("give an absolute path".into()));
    }
    let mut fd = openat(
        nix::fcntl::AT_FDCWD,
        "/",
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| bad(e.to_string()))?;
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => {
                fd = openat(
                    &fd,
                    name,
                    OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| match e {
                    Errno::ELOOP | Errno::ENOTDIR => bad(format!(
                        "{} is a symlink or not a directory; restores never follow symlinks",
                        Path::new(name).display()
                    )),
                    Errno::ENOENT => bad(format!("{} does not exist", Path::new(name).display())),
                    e => bad(e.to_string()),
                })?;
            }
            _ => return Err(bad("`..` is not allowed in a restore target".into())),
        }
    }
    Ok(fd)
}

/// Opens the directory `name` in `parent` without following a symlink. One this restore has
/// just created must still be as made (root's, mode 0700): a caller who swapped another
/// directory in between mkdir and open does not get it filled and handed over.
fn open_subdir(
    parent: &OwnedFd,
    name: &std::ffi::OsStr,
    just_made: bool,
) -> std::result::Result<OwnedFd, String> {
    let fd = openat(
        parent,
        name,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.to_string())?;
    if just_made {
        let st = nix::sys::stat::fstat(&fd).map_err(|e| e.to_string())?;
        if st.st_uid != nix::unistd::geteuid().as_raw() || st.st_mode & 0o7777 != 0o700 {
            return Err("the directory just created was replaced while restoring; nothing was written into it".into());
        }
    }
    Ok(fd)
}

/// The owner of an open directory.
pub fn owner_of(fd: &OwnedFd) -> Result<u32> {
    let st = nix::sys::stat::fstat(fd).map_err(|e| SnapshotError::Invalid(e.to_string()))?;
    Ok(st.st_uid)
}

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

/// Restores `node` (at `original` in snapshot `snap`) into `target`, or back where it was.
///
/// Where it lands: `TARGET/NAME` with a target, else `original` itself. A missing parent of the
/// original is re-created from the snapshot. For a member (`opts.only_uid`), the directory the
/// restore writes into (the target, or the nearest existing parent) must be theirs: a restore
/// never writes where its caller could not.
pub fn restore_to(
    repo: &Repository,
    snap: &crate::snapshot::Snapshot,
    node: &Node,
    original: &Path,
    target: Option<&Path>,
    opts: &RestoreOptions,
    progress: &Progress,
) -> Result<RestoreReport> {
    let check_owner = |fd: &OwnedFd, dir: &Path| -> Result<()> {
        if let Some(uid) = opts.only_uid {
            let owner = owner_of(fd)?;
            if owner != uid {
                return Err(SnapshotError::BadTarget {
                    path: dir.to_path_buf(),
                    why: format!(
                        "it belongs to uid {owner}, not to you (uid {uid}); restore into a directory of yours with --target DIR"
                    ),
                });
            }
        }
        Ok(())
    };
    if let Some(t) = target {
        let fd = open_dir_nofollow(t)?;
        check_owner(&fd, t)?;
        return restore_node(repo, node, &fd, t, opts, progress)
            .map_err(|e| with_snapshot(e, snap));
    }
    let parent = original.parent().ok_or_else(|| {
        SnapshotError::Invalid(format!(
            "{} has no parent directory; give --target",
            original.display()
        ))
    })?;
    // The nearest existing ancestor, then the missing directories below it, from the snapshot.
    let mut existing = parent.to_path_buf();
    let mut missing = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        missing.push(existing.clone());
        existing = match existing.parent() {
            Some(p) => p.to_path_buf(),
            None => break,
        };
    }
    let mut fd = open_dir_nofollow(&existing)?;
    check_owner(&fd, &existing)?;
    for dir in missing.iter().rev() {
        let n = crate::browse::lookup(repo, snap, dir, None)?.ok_or_else(|| {
            SnapshotError::BadTarget {
                path: dir.clone(),
                why: "it no longer exists and the snapshot does not hold it; give --target".into(),
            }
        })?;
        if let Some(uid) = opts.only_uid
            && n.uid != uid
        {
            return Err(SnapshotError::NotYours {
                path: dir.display().to_string(),
                owner: n.uid,
                caller: uid,
                snapshot: snap.id.clone(),
            });
        }
        let name = std::ffi::OsStr::from_bytes(&n.name);
        mkdirat(&fd, name, Mode::from_bits_truncate(0o700))
            .map_err(|e| SnapshotError::io("create", dir)(e.into()))?;
        let next = open_subdir(&fd, name, true).map_err(|why| SnapshotError::BadTarget {
            path: dir.clone(),
            why,
        })?;
        let f = File::from(next.try_clone().map_err(SnapshotError::io("open", dir))?);
        let (uid, gid, mode) = meta_for(opts, &n);
        if opts.set_owner {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid))
                .map_err(SnapshotError::io("chown", dir))?;
        }
        f.set_permissions(Permissions::from_mode(mode))
            .map_err(SnapshotError::io("chmod", dir))?;
        fd = next;
    }
    restore_node(repo, node, &fd, parent, opts, progress).map_err(|e| with_snapshot(e, snap))
}

/// Names the snapshot in a NotYours error raised below the snapshot level.
fn with_snapshot(e: SnapshotError, snap: &crate::snapshot::Snapshot) -> SnapshotError {
    match e {
        SnapshotError::NotYours {
            path,
            owner,
            caller,
            ..
        } => SnapshotError::NotYours {
            path,
            owner,
            caller,
            snapshot: snap.short_id().to_string(),
        },
        e => e,
    }
}
