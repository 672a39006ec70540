//! Reading a revision's files where a member has them, as that member: a hub cache (its root,
//! or one `models--org--name` folder) or a plain directory (a `--local-dir` download), written
//! as a tar stream for the controller to import.

use super::{FILES_DIR, HEADER_ENTRY, Header, HubError, MAX_FILES, RepoId, is_commit};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A revision found in a source: what the exporter knows of it, and its files (the path in the
/// revision, and where to read it).
#[derive(Debug)]
pub struct Found {
    /// Sent first in the stream.
    pub header: Header,
    /// Each file: its path in the revision, and the file to read (links followed).
    pub files: Vec<(PathBuf, PathBuf)>,
}

/// Finds `repo`'s `revision` in `dir`: in a hub cache through its refs and snapshots, otherwise
/// every file of `dir` (without the `.cache` and `.git` that downloaders leave).
pub fn find(dir: &Path, repo: &RepoId, revision: &str) -> Result<Found, HubError> {
    let folder_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let hub_folder = if dir.join("snapshots").is_dir() {
        // One model's folder: it must be the one asked for.
        if folder_name.starts_with("models--") && folder_name != repo.folder() {
            return Err(not_in_cache(dir, repo, vec![folder_name.to_string()]));
        }
        Some(dir.to_path_buf())
    } else if dir.join(repo.folder()).join("snapshots").is_dir() {
        Some(dir.join(repo.folder()))
    } else {
        // A hub cache without the model (a typo): never taken for a plain download.
        let models = hub_models(dir);
        if !models.is_empty() {
            return Err(not_in_cache(dir, repo, models));
        }
        None
    };
    let (root, commit, within) = match hub_folder {
        Some(folder) => {
            let commit = resolve(&folder, revision)?;
            (folder.join("snapshots").join(&commit), Some(commit), folder)
        }
        None => (dir.to_path_buf(), None, dir.to_path_buf()),
    };
    let within = std::fs::canonicalize(&within).map_err(|e| HubError::io(&within, e))?;
    let files = walk(&root, &within)?;
    if files.is_empty() {
        return Err(HubError::Empty(root));
    }
    Ok(Found {
        header: Header { commit },
        files,
    })
}

/// The `models--*` folders of a hub cache at `dir` (at most 64, in name order).
fn hub_models(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("models--"))
        .take(64)
        .collect();
    v.sort();
    v
}

/// The error for a hub cache without `repo`.
fn not_in_cache(dir: &Path, repo: &RepoId, models: Vec<String>) -> HubError {
    HubError::NotInCache {
        dir: dir.to_path_buf(),
        repo: repo.as_string(),
        models: models
            .iter()
            .map(|m| m.trim_start_matches("models--").replacen("--", "/", 1))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The error-maker for I/O on `p`.
fn io(p: &Path) -> impl Fn(std::io::Error) -> HubError + '_ {
    move |e| HubError::io(p, e)
}

/// The commit `revision` names in the hub folder `folder`: a snapshot of that name, or the
/// commit its ref holds.
fn resolve(folder: &Path, revision: &str) -> Result<String, HubError> {
    if is_commit(revision) && folder.join("snapshots").join(revision).is_dir() {
        return Ok(revision.to_string());
    }
    if let Ok(text) = std::fs::read_to_string(folder.join("refs").join(revision)) {
        let commit = text.trim();
        if super::check_revision(commit).is_ok() && folder.join("snapshots").join(commit).is_dir() {
            return Ok(commit.to_string());
        }
    }
    let names = |sub: &str| -> String {
        let mut v: Vec<String> = std::fs::read_dir(folder.join(sub))
            .into_iter()
            .flatten()
            .flatten()
            .take(64)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v.join(", ")
    };
    Err(HubError::NoRevision {
        dir: folder.to_path_buf(),
        revision: revision.to_string(),
        refs: names("refs"),
        snapshots: names("snapshots"),
    })
}

/// Every regular file under `root` (links to files followed, links to directories not), in
/// path order, at most [`MAX_FILES`]. A link must stay within `within` (canonical): the hub
/// folder of a hub cache (its snapshots link into its blobs), or the download itself. An admin
/// adding a member's directory as root must not carry a planted `-> /etc/shadow` into a model
/// every member can read.
fn walk(root: &Path, within: &Path) -> Result<Vec<(PathBuf, PathBuf)>, HubError> {
    let mut out = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() != 1 || !matches!(e.file_name().to_str(), Some(".cache" | ".git"))
        });
    for entry in walker {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(root).to_path_buf();
            HubError::io(&path, e.into())
        })?;
        let meta = std::fs::metadata(entry.path()).map_err(|e| HubError::io(entry.path(), e))?;
        if !meta.is_file() {
            continue;
        }
        // What is read: the file itself, or where its link leads (never through a link again).
        let mut read = entry.path().to_path_buf();
        if entry.path_is_symlink() {
            let target =
                std::fs::canonicalize(entry.path()).map_err(|e| HubError::io(entry.path(), e))?;
            if !target.starts_with(within) {
                return Err(HubError::LinkOutside {
                    path: entry.path().to_path_buf(),
                    target,
                });
            }
            read = target;
        }
        if out.len() == MAX_FILES {
            return Err(HubError::TooManyFiles {
                dir: root.to_path_buf(),
                max: MAX_FILES,
            });
        }
        let rel = entry
            .path()
            .strip_prefix(root)
            .expect("under the root")
            .to_path_buf();
        out.push((rel, read));
    }
    Ok(out)
}

/// Writes `found` as a tar stream: the header entry, then each file under `files/`. `progress`
/// is told the bytes written so far.
pub fn write(found: &Found, out: impl Write, progress: &dyn Fn(u64)) -> Result<(), HubError> {
    let mut tar = tar::Builder::new(out);
    let header = serde_json::to_vec(&found.header).expect("a header serialises");
    let mut h = tar::Header::new_gnu();
    h.set_size(header.len() as u64);
    h.set_mode(0o444);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, HEADER_ENTRY, header.as_slice())
        .map_err(io(Path::new(HEADER_ENTRY)))?;
    let mut done = 0u64;
    for (rel, path) in &found.files {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(path)
            .map_err(io(path))?;
        let size = file.metadata().map_err(io(path))?.len();
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o444);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(
            &mut h,
            Path::new(FILES_DIR).join(rel),
            std::io::Read::take(&mut file, size),
        )
        .map_err(io(path))?;
        done += size;
        progress(done);
    }
    tar.into_inner()
        .map_err(io(Path::new("-")))?
        .flush()
        .map_err(io(Path::new("-")))
}
