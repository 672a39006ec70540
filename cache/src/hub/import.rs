//! Writing a revision into the lab's store from the exporter's tar stream, as the controller:
//! each file is hashed as it is written and kept once under `blobs/`, the revision's snapshot
//! is built beside its final name and renamed into place, then its refs are written.

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
/// source, which holds its hub folder). Files larger than `max_file_bytes` are refused.
pub fn import(
    root: &Path,
    repo: &RepoId,
    revision: &str,
    input: impl Read,
    max_file_bytes: u64,
) -> Result<Imported, HubError> {
    let folder = root.join(repo.folder());
    let blobs = folder.join("blobs");
    for d in [
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
        let (hash, fresh) = write_blob(&blobs, &mut entry, size)?;
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
    let commit = match header.commit.filter(|c| super::check_revision(c).is_ok()) {
        Some(c) => c,
        None if is_commit(revision) => revision.to_string(),
        None => made_commit(&files),
    };
    write_snapshot(&folder, &commit, &files)?;
    if revision != commit {
        write_ref(&folder, revision, &commit)?;
    }
    write_ref(&folder, "main", &commit)?;
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

/// Writes one file's bytes to a temporary blob while hashing them, then keeps it under its hash
/// (or drops it when that blob is there already). Its hash, and whether it was new.
fn write_blob(blobs: &Path, input: &mut impl Read, size: u64) -> Result<(String, bool), HubError> {
    let tmp = blobs.join(format!(".incoming-{}", unique()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o444)
        .custom_flags(libc_nofollow())
        .open(&tmp)
        .map_err(|e| HubError::io(&tmp, e))?;
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
        out.write_all(&buf[..n])
            .map_err(|e| HubError::io(&tmp, e))?;
        left -= n as u64;
    }
    out.sync_all().map_err(|e| HubError::io(&tmp, e))?;
    drop(out);
    let hash = hasher.finalize().to_hex().to_string();
    let blob = blobs.join(&hash);
    if blob.is_file() {
        let _ = std::fs::remove_file(&tmp);
        return Ok((hash, false));
    }
    std::fs::rename(&tmp, &blob).map_err(|e| HubError::io(&blob, e))?;
    Ok((hash, true))
}

/// A name part no other import of this process or another uses at the same time.
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// `O_NOFOLLOW`: a temporary blob is never written through a link.
fn libc_nofollow() -> i32 {
    nix::fcntl::OFlag::O_NOFOLLOW.bits()
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

/// Builds `snapshots/<commit>/` beside its final name (relative links into `blobs/`), then
/// renames it into place, replacing an older snapshot of that commit.
fn write_snapshot(
    folder: &Path,
    commit: &str,
    files: &[(PathBuf, String)],
) -> Result<(), HubError> {
    let snapshots = folder.join("snapshots");
    let partial = snapshots.join(format!(".partial-{commit}-{}", unique()));
    let _ = std::fs::remove_dir_all(&partial);
    for (rel, hash) in files {
        let link = partial.join(rel);
        let parent = link.parent().expect("under the snapshot");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(|e| HubError::io(parent, e))?;
        // From snapshots/<commit>/a/b/file up to the folder: one `..` per directory.
        let ups = rel.components().count() + 1;
        let target = "../".repeat(ups) + "blobs/" + hash;
        std::os::unix::fs::symlink(&target, &link).map_err(|e| HubError::io(&link, e))?;
    }
    let dest = snapshots.join(commit);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| HubError::io(&dest, e))?;
    }
    std::fs::rename(&partial, &dest).map_err(|e| HubError::io(&dest, e))?;
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| HubError::io(&dest, e))
}

/// `refs/<name>` holds `commit` (written whole, then renamed).
fn write_ref(folder: &Path, name: &str, commit: &str) -> Result<(), HubError> {
    let refs = folder.join("refs");
    let tmp = refs.join(format!(".{name}.partial-{}", unique()));
    std::fs::write(&tmp, commit).map_err(|e| HubError::io(&tmp, e))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o444))
        .map_err(|e| HubError::io(&tmp, e))?;
    let dest = refs.join(name);
    std::fs::rename(&tmp, &dest).map_err(|e| HubError::io(&dest, e))
}
