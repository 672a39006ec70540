//! Writing a revision into the lab's store from the exporter's tar stream, as the controller:
//! each file is hashed as it is written and kept once under `blobs/`, the revision's snapshot
//! is built outside the source and renamed into place, then its refs are written.
//!
//! Everything is first written in a directory outside the source (`tmp`, on the same file
//! system) and renamed in, and only what the revision brings new is: adding the same files
//! again leaves the source as it was, so its next scan finds no new version, and a scan never
//! sees a half-written file.

use super::{FILES_DIR, HEADER_ENTRY, Header, HubError, MAX_FILES, RepoId, is_commit};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// What an import wrote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Imported {
    /// The commit the revision's snapshot is named by.
    pub commit: String,
    /// Files in the revision.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes of blobs the store did not hold before.
    pub new_bytes: u64,
}

/// Reads the stream `input` and adds `repo`'s `revision` under `root` (the model's dataset
/// source, which holds its hub folder), through `tmp`. Files larger than `max_file_bytes`
/// are refused, and so is a file that would leave the store's file system under 5% free.
pub fn import(
    root: &Path,
    repo: &RepoId,
    revision: &str,
    input: impl Read,
    max_file_bytes: u64,
    tmp: &Path,
) -> Result<Imported, HubError> {
    let folder = root.join(repo.folder());
    let blobs = folder.join("blobs");
    for d in [
        tmp,
        root,
        &folder,
        &blobs,
        &folder.join("snapshots"),
        &folder.join("refs"),
    ] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(d)
            .map_err(|e| HubError::io(d, e))?;
    }
    let mut header = Header::default();
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let (mut bytes, mut new_bytes) = (0u64, 0u64);
    let malformed = |e: std::io::Error| HubError::Malformed(e.to_string());
    let mut archive = tar::Archive::new(input);
    for entry in archive.entries().map_err(malformed)? {
        let mut entry = entry.map_err(malformed)?;
        let path = entry.path().map_err(malformed)?.into_owned();
        if path == Path::new(HEADER_ENTRY) {
            let mut text = Vec::new();
            (&mut entry)
                .take(64 * 1024)
                .read_to_end(&mut text)
                .map_err(malformed)?;
            header = serde_json::from_slice(&text)
                .map_err(|e| HubError::Malformed(format!("its header: {e}")))?;
            continue;
        }
        let rel = file_path(&path)?;
        if !entry.header().entry_type().is_file() {
            return Err(HubError::Malformed(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        let size = entry.header().size().map_err(malformed)?;
        if size > max_file_bytes {
            return Err(HubError::TooLarge {
                path: rel.display().to_string(),
                size,
                max: max_file_bytes,
            });
        }
        if files.len() == MAX_FILES {
            return Err(HubError::TooManyFiles {
                dir: root.to_path_buf(),
                max: MAX_FILES,
            });
        }
        let (hash, fresh) = write_blob(&blobs, tmp, &mut entry, size)?;
        bytes += size;
        if fresh {
            new_bytes += size;
        }
        files.push((rel, hash));
    }
    if files.is_empty() {
        return Err(HubError::Empty(PathBuf::from(repo.as_string())));
    }
    files.sort();
    files.dedup_by(|a, b| a.0 == b.0);
    let commit = match header.commit.filter(|c| is_commit(c)) {
        Some(c) => c,
        None if is_commit(revision) => revision.to_string(),
        None => made_commit(&files),
    };
    write_snapshot(&folder, tmp, &commit, &files)?;
    if revision != commit {
        write_ref(&folder, tmp, revision, &commit)?;
    }
    write_ref(&folder, tmp, "main", &commit)?;
    Ok(Imported {
        commit,
        files: files.len() as u64,
        bytes,
        new_bytes,
    })
}

/// The path in the revision of a stream entry: under `files/`, plain components only.
fn file_path(path: &Path) -> Result<PathBuf, HubError> {
    let rel = path
        .strip_prefix(FILES_DIR)
        .map_err(|_| HubError::Malformed(format!("unexpected entry {}", path.display())))?;
    let plain = rel.components().all(|c| match c {
        Component::Normal(s) => !s.to_string_lossy().starts_with(".labpool"),
        _ => false,
    });
    if !plain || rel.as_os_str().is_empty() {
        return Err(HubError::Malformed(format!(
            "unsafe entry {}",
            path.display()
        )));
    }
    Ok(rel.to_path_buf())
}

/// Writes one file's bytes in `tmp_dir` while hashing them, then keeps it under its hash in
/// `blobs` (or drops it when that blob is there already). Its hash, and whether it was new.
fn write_blob(
    blobs: &Path,
    tmp_dir: &Path,
    input: &mut impl Read,
    size: u64,
) -> Result<(String, bool), HubError> {
    check_room(tmp_dir, size)?;
    let tmp = tmp_dir.join(format!("blob-{}", unique()));
    let hash = match copy_hashed(&tmp, input, size) {
        Ok(h) => h,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let blob = blobs.join(&hash);
    if blob.is_file() {
        let _ = std::fs::remove_file(&tmp);
        return Ok((hash, false));
    }
    if let Err(e) = std::fs::rename(&tmp, &blob) {
        let _ = std::fs::remove_file(&tmp);
        return Err(HubError::io(&blob, e));
    }
    Ok((hash, true))
}

/// Refuses a file that would leave the store's file system under 5% free.
fn check_room(dir: &Path, size: u64) -> Result<(), HubError> {
    let fs = nix::sys::statvfs::statvfs(dir).map_err(|e| HubError::io(dir, e.into()))?;
    let unit = fs.fragment_size();
    let (free, total) = (fs.blocks_available() * unit, fs.blocks() * unit);
    if free.saturating_sub(size) < total / 20 {
        return Err(HubError::NoRoom {
            dir: dir.to_path_buf(),
            needed: size,
        });
    }
    Ok(())
}

/// Writes `size` bytes of `input` to the new file `tmp`, synced; their BLAKE3 hash.
fn copy_hashed(tmp: &Path, input: &mut impl Read, size: u64) -> Result<String, HubError> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(tmp)
        .map_err(|e| HubError::io(tmp, e))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = input
            .read(&mut buf[..want])
            .map_err(|e| HubError::Malformed(e.to_string()))?;
        if n == 0 {
            return Err(HubError::Malformed("the stream ended inside a file".into()));
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| HubError::io(tmp, e))?;
        left -= n as u64;
    }
    out.sync_all().map_err(|e| HubError::io(tmp, e))?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// A commit for a revision that came without one: 40 hex digits of the hash of its paths and
/// contents, so the same files give the same snapshot.
fn made_commit(files: &[(PathBuf, String)]) -> String {
    let mut h = blake3::Hasher::new();
    for (rel, hash) in files {
        h.update(rel.to_string_lossy().as_bytes());
        h.update(b"\0");
        h.update(hash.as_bytes());
        h.update(b"\n");
    }
    h.finalize().to_hex()[..40].to_string()
}

/// The link a snapshot holds for a file at `rel` whose blob is `hash`: from
/// `snapshots/<commit>/a/b/file` up to the folder, one `..` per directory.
fn link_target(rel: &Path, hash: &str) -> PathBuf {
    PathBuf::from("../".repeat(rel.components().count() + 1) + "blobs/" + hash)
}

/// Puts `snapshots/<commit>/` in place (relative links into `blobs/`), built in `tmp` and
/// renamed in; one that already holds exactly these links is left alone.
fn write_snapshot(
    folder: &Path,
    tmp: &Path,
    commit: &str,
    files: &[(PathBuf, String)],
) -> Result<(), HubError> {
    let dest = folder.join("snapshots").join(commit);
    let wanted: Vec<(PathBuf, PathBuf)> = files
        .iter()
        .map(|(rel, hash)| (rel.clone(), link_target(rel, hash)))
        .collect();
    if dest.is_dir() && snapshot_links(&dest) == wanted {
        return Ok(());
    }
    let partial = tmp.join(format!("snapshot-{}", unique()));
    let built = build_snapshot(&partial, &dest, &wanted);
    if built.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    built
}

/// Builds the links `wanted` in `partial`, then renames it to `dest` (replacing an older one).
fn build_snapshot(
    partial: &Path,
    dest: &Path,
    wanted: &[(PathBuf, PathBuf)],
) -> Result<(), HubError> {
    for (rel, target) in wanted {
        let link = partial.join(rel);
        let parent = link.parent().expect("under the snapshot");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(|e| HubError::io(parent, e))?;
        std::os::unix::fs::symlink(target, &link).map_err(|e| HubError::io(&link, e))?;
    }
    std::fs::set_permissions(partial, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| HubError::io(partial, e))?;
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|e| HubError::io(dest, e))?;
    }
    std::fs::rename(partial, dest).map_err(|e| HubError::io(dest, e))
}

/// The links a snapshot directory holds, by path, in path order (bounded).
fn snapshot_links(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .flatten()
        .take(MAX_FILES * 2)
    {
        if entry.path_is_symlink()
            && let (Ok(rel), Ok(target)) = (
                entry.path().strip_prefix(dir),
                std::fs::read_link(entry.path()),
            )
        {
            out.push((rel.to_path_buf(), target));
        }
    }
    out.sort();
    out
}

/// `refs/<name>` holds `commit`: written whole in `tmp` and renamed in, or left alone when it
/// already does.
fn write_ref(folder: &Path, tmp: &Path, name: &str, commit: &str) -> Result<(), HubError> {
    let dest = folder.join("refs").join(name);
    if std::fs::read_to_string(&dest).is_ok_and(|old| old == commit) {
        return Ok(());
    }
    let partial = tmp.join(format!("ref-{}", unique()));
    std::fs::write(&partial, commit).map_err(|e| HubError::io(&partial, e))?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o444))
        .map_err(|e| HubError::io(&partial, e))?;
    std::fs::rename(&partial, &dest).map_err(|e| HubError::io(&dest, e))
}

/// A name part no other import of this process or another uses at the same time.
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}
