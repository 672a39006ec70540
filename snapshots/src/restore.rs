//! `restore`: writes a node of a snapshot (a file or a whole directory) back to disk, with mode,
//! owner and mtime.
//!
//! Every path is created relative to an open directory descriptor, with `O_NOFOLLOW` and
//! `O_EXCL`, so neither a symlink planted in the target nor a forged name in the repository can
//! make a restore write outside its target. Hard links are re-created as hard links; runs of
//! zeros become holes again, so sparse files stay sparse.
//!
//! This file holds the options and the report, the target side (opening a target without
//! following symlinks, re-creating missing parents, checking who owns what is written into)
//! and [`restore_to`]; [`restore_node`] and the writing of entries are in `writer`.

use crate::error::{Result, SnapshotError};
use crate::progress::Progress;
use crate::repo::Repository;
use crate::tree::Node;
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, mkdirat};
use std::fs::{File, Permissions};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

mod writer;

pub use writer::{restore_node, total_bytes};

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
