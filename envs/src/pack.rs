//! Packing a build (tar + zstd) and unpacking it on a node at the same path.
//!
//! Builds are not relocatable (a venv's scripts name its path), so an archive holds paths
//! relative to the build directory and is unpacked at the very same path. Symlinks (a venv's
//! `bin/python -> /usr/bin/python3`), modes and mtimes are kept.

use crate::EnvError;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

/// zstd level: fast, and most of a venv is already-compressed wheels' contents anyway.
const LEVEL: i32 = 3;

/// Packs the directory `dir` into `archive` (written to a temporary name, then renamed).
/// Returns the archive's size in bytes.
pub fn pack(dir: &Path, archive: &Path) -> Result<u64, EnvError> {
    let tmp = sibling(archive, &format!(".tmp-{}", std::process::id()));
    let result = write_archive(dir, &tmp).and_then(|()| {
        std::fs::rename(&tmp, archive).map_err(EnvError::io("rename into place", archive))
    });
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let meta = std::fs::metadata(archive).map_err(EnvError::io("read the size of", archive))?;
    Ok(meta.len())
}

fn write_archive(dir: &Path, to: &Path) -> Result<(), EnvError> {
    let io = |action| EnvError::io(action, to);
    let file = File::create(to).map_err(io("create"))?;
    let mut encoder = zstd::Encoder::new(file, LEVEL).map_err(io("compress into"))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    encoder
        .multithread(threads as u32)
        .map_err(io("compress into"))?;
    let mut tar = tar::Builder::new(encoder);
    tar.follow_symlinks(false);
    tar.append_dir_all("", dir)
        .map_err(EnvError::io("archive", dir))?;
    let encoder = tar.into_inner().map_err(io("write"))?;
    let file = encoder.finish().map_err(io("write"))?;
    file.sync_all().map_err(io("write"))
}

/// Unpacks `archive` to `dest` (into `dest.partial`, then renamed), unless `dest` already holds
/// a complete build. Returns true when it unpacked, false when the build was already there.
///
/// An incomplete `dest` (an interrupted build or unpack) is replaced. Entries with absolute
/// paths or `..` are refused. Unpacks of the same `dest` at once, by processes of one node or of
/// nodes sharing the store, all succeed and leave one complete build.
pub fn unpack(archive: &Path, dest: &Path) -> Result<bool, EnvError> {
    if is_complete(dest) {
        return Ok(false);
    }
    // Nodes may share one store (NFS): each unpacks into a directory of its own, and the
    // first rename wins. A later one finds the build in place and drops its copy.
    let host = hostname();
    remove_stale_partials(dest, &host);
    let partial = sibling(dest, &format!(".partial-{host}-{}", std::process::id()));
    remove_any(&partial)?;
    std::fs::create_dir_all(&partial).map_err(EnvError::io("create directory", &partial))?;
    if let Err(e) = unpack_into(archive, &partial).and_then(|()| sync_fs(&partial)) {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    if !place(&partial, dest)? {
        return Ok(false);
    }
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(EnvError::io("sync directory", parent))?;
    }
    Ok(true)
}

/// Puts the complete build at `partial` in place at `dest`. Returns false when another
/// process's complete build is there (ours is dropped).
///
/// A complete `dest` is never removed: a node may be starting a job from it. What else is
/// there (an interrupted unpack in place, something left by hand) is swapped with ours in one
/// step (`RENAME_EXCHANGE`) and removed after, so `dest` is never missing. On a file system
/// without that exchange (NFS), it is moved aside first: `dest` is missing for a moment.
/// Before, every unpacker removed what it found, and two of them at once could remove each
/// other's complete build, or fail with "Directory not empty".
fn place(partial: &Path, dest: &Path) -> Result<bool, EnvError> {
    use nix::errno::Errno;
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    let drop_ours = || {
        let _ = std::fs::remove_dir_all(partial);
    };
    let aside = sibling(partial, "-old");
    let mut last = None;
    // Bounded: each turn places ours, finds a complete build, or saw `dest` change under it.
    for _ in 0..16 {
        let Err(e) = std::fs::rename(partial, dest) else {
            return Ok(true);
        };
        // Anything but "something is there" is a real failure (permissions, a full disk).
        let occupied = matches!(
            Errno::from_raw(e.raw_os_error().unwrap_or(0)),
            Errno::ENOTEMPTY | Errno::EEXIST | Errno::ENOTDIR | Errno::EISDIR
        );
        if !occupied {
            drop_ours();
            return Err(EnvError::io("rename into place", dest)(e));
        }
        if is_complete(dest) {
            drop_ours();
            return Ok(false);
        }
        match renameat2(
            AT_FDCWD,
            partial,
            AT_FDCWD,
            dest,
            RenameFlags::RENAME_EXCHANGE,
        ) {
            Ok(()) => {
                // `partial` now holds what was at `dest`.
                let _ = remove_any(partial);
                return Ok(true);
            }
            Err(Errno::ENOENT) => {}
            Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {
                match std::fs::rename(dest, &aside) {
                    Ok(()) => {
                        let _ = remove_any(&aside);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        drop_ours();
                        return Err(EnvError::io("move aside", dest)(e));
                    }
                }
            }
            Err(e) => last = Some(std::io::Error::from(e)),
        }
    }
    drop_ours();
    let e = last.unwrap_or_else(|| std::io::Error::other("it kept changing under the unpack"));
    Err(EnvError::io("rename into place", dest)(e))
}

/// Removes the partial unpacks of `dest` that no live process of this host is writing: the
/// older single `NAME.partial`, and `NAME.partial-HOST-PID` of a PID that is gone. Other
/// hosts' partials are theirs to clean.
fn remove_stale_partials(dest: &Path, host: &str) {
    let _ = remove_any(&sibling(dest, ".partial"));
    let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
        return;
    };
    let prefix = format!("{}.partial-{host}-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    // Bounded: a store holds one entry per build, and at most a few partials each.
    for entry in entries.flatten().take(100_000) {
        let file = entry.file_name();
        let Some(pid) = file
            .to_string_lossy()
            .strip_prefix(&prefix)
            .map(str::to_owned)
        else {
            continue;
        };
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|p| p == std::process::id() || Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = remove_any(&entry.path());
        }
    }
}

/// This host's name, for the names of partial unpacks (`localhost` when it has none).
fn hostname() -> String {
    let name = nix::unistd::gethostname()
        .map(|n| n.to_string_lossy().replace(['/', '\0'], "_"))
        .unwrap_or_default();
    if name.is_empty() {
        return "localhost".to_string();
    }
    name
}

/// True when `dir` holds a complete build (its `.labpool-env.json` is there).
pub fn is_complete(dir: &Path) -> bool {
    dir.join(crate::build::MARKER).is_file()
}

/// Unpacks every entry into `to`; directories get their modes and mtimes at the end, so a
/// read-only directory can still be filled and its mtime is not bumped by its contents.
fn unpack_into(archive: &Path, to: &Path) -> Result<(), EnvError> {
    let io = |action| EnvError::io(action, archive);
    let file = File::open(archive).map_err(io("open"))?;
    let decoder = zstd::Decoder::new(file).map_err(io("decompress"))?;
    let mut tar = tar::Archive::new(decoder);
    tar.set_preserve_permissions(true);
    tar.set_preserve_mtime(true);
    let mut dirs = Vec::new();
    for entry in tar.entries().map_err(io("read"))? {
        let mut entry = entry.map_err(io("read"))?;
        let path = entry.path().map_err(io("read"))?.into_owned();
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(EnvError::UnsafeEntry {
                archive: archive.to_path_buf(),
                entry: path.display().to_string(),
            });
        }
        // A symbolic link unpacked earlier must never lead a later entry out of `to`.
        refuse_symlinked_parents(archive, to, &path)?;
        let header = entry.header();
        if header.entry_type().is_dir() {
            let target = to.join(&path);
            std::fs::create_dir_all(&target).map_err(EnvError::io("create directory", &target))?;
            dirs.push((
                target,
                header.mode().map_err(io("read"))?,
                header.mtime().map_err(io("read"))?,
            ));
        } else {
            entry.unpack_in(to).map_err(io("unpack"))?;
        }
    }
    for (dir, mode, mtime) in dirs.iter().rev() {
        use std::os::unix::fs::PermissionsExt;
        // Only a real directory: a later entry may have put a link where it was.
        let real = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
        if !real {
            return Err(EnvError::UnsafeEntry {
                archive: archive.to_path_buf(),
                entry: dir.display().to_string(),
            });
        }
        let time = filetime::FileTime::from_unix_time(*mtime as i64, 0);
        filetime::set_file_times(dir, time, time).map_err(EnvError::io("set the times of", dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(*mode & 0o7777))
            .map_err(EnvError::io("set the mode of", dir))?;
    }
    Ok(())
}

/// Flushes the file system that holds `dir` (one `syncfs` instead of an fsync per file), so
/// that the build is on disk before its rename makes it complete.
fn sync_fs(dir: &Path) -> Result<(), EnvError> {
    let d = File::open(dir).map_err(EnvError::io("open", dir))?;
    nix::unistd::syncfs(&d).map_err(|e| EnvError::io("sync", dir)(e.into()))
}

/// Refuses `path` when any directory on the way to it inside `to` is a symbolic link.
fn refuse_symlinked_parents(archive: &Path, to: &Path, path: &Path) -> Result<(), EnvError> {
    let mut at = to.to_path_buf();
    let parts: Vec<_> = path.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
                return Err(EnvError::UnsafeEntry {
                    archive: archive.to_path_buf(),
                    entry: path.display().to_string(),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// `path` with `suffix` added to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Removes `path` whatever it is; nothing there is fine.
fn remove_any(path: &Path) -> Result<(), EnvError> {
    let result = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    result.map_err(EnvError::io("remove", path))
}
