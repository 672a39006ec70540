//! A job's Hugging Face hub cache: `user/hf/hub` in the job's own corner (its tmpfs, see
//! [`crate::corner`]), the job user's and writable. For each of its models it holds the hub's
//! folder with writable `refs/` (copied), an empty writable `blobs/`, and one link per staged
//! snapshot (`snapshots/<commit>` → the read-only copy in this node's cache, whose files link
//! on into the cache's own `blobs/`). `HF_HOME` and `HF_HUB_CACHE` point there, so
//! `from_pretrained("org/name")` and `hf_hub_download(..., local_files_only=True)` find the
//! staged weights with no network, and what the job fetches itself (another revision, another
//! file, online) is written beside them, never into the shared copy.
//!
//! Decisions recorded here:
//! - What the job downloads lives in its corner, [`HUB_ROOM`] at most, counted in its memory
//!   limit, and goes with the job: never on the node's state disk or in the cache. Weights a job
//!   needs belong in the model cache (`labpool model add`).
//! - The member's own token stays usable: when there is one where their environment would have
//!   found it, `HF_TOKEN_PATH` names it (unless they set it).

use crate::api::agent::Launch;
use crate::jobdir::JobDir;
use labpool_cache::hub::refs::read_refs;
use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

/// Room a job's corner gets for its hub cache, beyond the corner's own.
pub const HUB_ROOM: u64 = 256 << 20;

/// The most snapshots of one model linked.
const MAX_ENTRIES: usize = 1024;

/// The corner room `launch` needs for its hub cache.
pub fn room(launch: &Launch) -> u64 {
    if launch.models.is_empty() {
        0
    } else {
        HUB_ROOM
    }
}

/// Makes the job's hub cache and sets its variables; nothing when it reads no model. The
/// variables replace any the member's own environment carried: they asked for these models.
pub fn prepare(
    launch: &Launch,
    dir: &JobDir,
    datasets: &[(String, PathBuf)],
    env: &mut BTreeMap<String, String>,
) -> io::Result<()> {
    if launch.models.is_empty() {
        return Ok(());
    }
    let owner = Owner {
        uid: launch.uid,
        gid: launch.gid,
    };
    let home = dir.user_dir().join("hf");
    let hub = home.join("hub");
    owner.dir(&home)?;
    owner.dir(&hub)?;
    for m in &launch.models {
        let staged = datasets.iter().find(|(name, _)| *name == m.dataset);
        let Some((_, staged)) = staged.filter(|_| one_name(&m.folder)) else {
            return Err(io::Error::other(format!(
                "model {} ({}) is not among the job's staged datasets",
                m.repo, m.dataset
            )));
        };
        overlay(&owner, &staged.join(&m.folder), &hub.join(&m.folder))?;
    }
    let token = match env.get("HF_HOME") {
        Some(h) => format!("{h}/token"),
        None => format!(
            "{}/.cache/huggingface/token",
            env.get("HOME").map_or("", String::as_str)
        ),
    };
    // Only one that is there: huggingface_hub takes a token path it cannot read for an error.
    if Path::new(&token).is_file() {
        env.entry("HF_TOKEN_PATH".into()).or_insert(token);
    }
    let (home, hub) = (home.display().to_string(), hub.display().to_string());
    env.insert("HF_HOME".into(), home);
    env.insert("HF_HUB_CACHE".into(), hub.clone());
    // The name huggingface_hub read before 0.20, which older transformers still pass on.
    env.insert("HUGGINGFACE_HUB_CACHE".into(), hub);
    Ok(())
}

/// The job's own folder `to` over the staged folder `from`.
fn overlay(owner: &Owner, from: &Path, to: &Path) -> io::Result<()> {
    for d in [
        to.to_path_buf(),
        to.join("blobs"),
        to.join("snapshots"),
        to.join("refs"),
    ] {
        owner.dir(&d)?;
    }
    for commit in names(&from.join("snapshots"))? {
        let link = to.join("snapshots").join(&commit);
        std::os::unix::fs::symlink(from.join("snapshots").join(&commit), &link)?;
        owner.link(&link)?;
    }
    for (name, commit) in read_refs(&from.join("refs"))? {
        let copy = to.join("refs").join(&name);
        std::fs::write(&copy, commit)?;
        owner.link(&copy)?;
    }
    Ok(())
}

/// The entries of `dir` that are plain names (no dot files), in order, at most
/// [`MAX_ENTRIES`]; none when it is missing.
fn names(dir: &Path) -> io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.') && one_name(n))
        .take(MAX_ENTRIES)
        .collect();
    out.sort();
    Ok(out)
}

/// True for one plain path component.
fn one_name(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    matches!(
        (parts.next(), parts.next()),
        (Some(Component::Normal(_)), None)
    )
}

/// Who the hub cache's entries belong to: the job's user.
struct Owner {
    uid: u32,
    gid: u32,
}

impl Owner {
    /// Makes directory `d` (0700) theirs.
    fn dir(&self, d: &Path) -> io::Result<()> {
        std::fs::DirBuilder::new().mode(0o700).create(d)?;
        self.link(d)
    }

    /// Gives `p` (a link itself, not what it leads to) to them, as root.
    fn link(&self, p: &Path) -> io::Result<()> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(());
        }
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            p,
            Some(nix::unistd::Uid::from_raw(self.uid)),
            Some(nix::unistd::Gid::from_raw(self.gid)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(io::Error::from)
    }
}
