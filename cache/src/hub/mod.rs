//! Model weights in the Hugging Face hub's own cache layout, so that a job's
//! `from_pretrained("org/name")` and `hf_hub_download(..., local_files_only=True)` find them
//! with no network.
//!
//! A model's tree in the lab's store is a dataset like any other (versions, staging, pins,
//! eviction, peers), whose root holds one hub folder:
//!
//! ```text
//! models--org--name/
//!   blobs/<blake3>                 each distinct file once, read-only
//!   snapshots/<commit>/<path>      relative symlinks into blobs/, one tree per revision
//!   refs/<revision>                the commit a branch or tag name resolves to
//! ```
//!
//! Decisions recorded here:
//! - Blobs are named by their BLAKE3 hash, not the hub's git or LFS hashes: the hub's readers
//!   only follow the snapshot links, and the name keeps each distinct file once however many
//!   revisions share it.
//! - A revision added from a plain directory (a `--local-dir` download) has no commit of its
//!   own: it is given one made from its files (40 hex digits of the BLAKE3 hash of its paths and
//!   contents), so adding the same files twice gives the same snapshot.
//! - `refs/main` names the revision added last: what a job gets when it asks for no revision.
//! - The files are read by the member who adds them (a child process of theirs writes a tar
//!   stream, [`export`]), and written by the controller ([`import`]): nothing they can still
//!   write ends up in the store.

pub mod export;
pub mod import;
pub mod refs;

use std::path::PathBuf;

/// The most files one revision may hold.
pub const MAX_FILES: usize = 100_000;

/// The name of the tar entry that carries what the exporter knew of the revision.
pub const HEADER_ENTRY: &str = ".labpool-model.json";

/// The directory under which a revision's files travel in the tar stream.
pub const FILES_DIR: &str = "files";

/// A model repository id, `org/name`, as the hub spells it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoId {
    org: String,
    name: String,
}

impl RepoId {
    /// Parses `org/name`: each part 1 to 96 of letters, digits, `-`, `_` and `.`, starting with
    /// a letter or digit, as the hub allows.
    pub fn parse(text: &str) -> Result<RepoId, HubError> {
        let bad = || HubError::InvalidRepo(text.to_string());
        let (org, name) = text.split_once('/').ok_or_else(bad)?;
        // As the hub: a word character at both ends, so `org--name` splits one way only.
        let part_ok = |p: &str| {
            (1..=96).contains(&p.len())
                && p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && p.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && !p.contains("--")
                && !p.contains("..")
        };
        if !part_ok(org) || !part_ok(name) {
            return Err(bad());
        }
        Ok(RepoId {
            org: org.to_string(),
            name: name.to_string(),
        })
    }

    /// `org/name`.
    pub fn as_string(&self) -> String {
        format!("{}/{}", self.org, self.name)
    }

    /// The hub's folder for it: `models--org--name`.
    pub fn folder(&self) -> String {
        format!("models--{}--{}", self.org, self.name)
    }
}

impl std::fmt::Display for RepoId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.org, self.name)
    }
}

/// Parses `org/name[@revision]`; the revision defaults to `main`.
pub fn parse_spec(text: &str) -> Result<(RepoId, String), HubError> {
    let (repo, revision) = match text.split_once('@') {
        Some((r, rev)) => (r, rev),
        None => (text, "main"),
    };
    let repo = RepoId::parse(repo)?;
    check_revision(revision)?;
    Ok((repo, revision.to_string()))
}

/// A revision: a branch, a tag or a commit; 1 to 128 of letters, digits, `-`, `_` and `.`,
/// starting with a letter or digit (it becomes a file name under `refs/`).
pub fn check_revision(revision: &str) -> Result<(), HubError> {
    let ok = (1..=128).contains(&revision.len())
        && revision
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && revision
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !revision.contains("..");
    if ok {
        Ok(())
    } else {
        Err(HubError::InvalidRevision(revision.to_string()))
    }
}

/// True for a full commit hash (40 lowercase hex digits).
pub fn is_commit(revision: &str) -> bool {
    revision.len() == 40
        && revision
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What the exporter sends first.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Header {
    /// The commit the revision resolved to in a hub cache; `None` for a plain directory.
    pub commit: Option<String>,
}

/// What can go wrong with a model.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// A repository id that is not `org/name`.
    #[error(
        "invalid model {0:?}: write it as the hub does, ORG/NAME (letters, digits, '-', '_' and '.'), optionally @REVISION"
    )]
    InvalidRepo(String),
    /// A revision that cannot be a ref's file name.
    #[error(
        "invalid revision {0:?}: use a branch, tag or commit of letters, digits, '-', '_' and '.'"
    )]
    InvalidRevision(String),
    /// A hub cache without the revision asked for.
    #[error(
        "{dir} holds no revision {revision:?} of this model; it has refs [{refs}] and snapshots [{snapshots}]: name one of them after @"
    )]
    NoRevision {
        /// The hub folder read.
        dir: PathBuf,
        /// What was asked for.
        revision: String,
        /// The refs it has.
        refs: String,
        /// The snapshots it has.
        snapshots: String,
    },
    /// A hub cache that does not hold the model asked for.
    #[error(
        "{dir} is a Hugging Face hub cache without {repo}; it holds [{models}]: name one of them, or give that model's own folder"
    )]
    NotInCache {
        /// The directory given.
        dir: PathBuf,
        /// The model asked for.
        repo: String,
        /// The models it holds.
        models: String,
    },
    /// A file of the source that is a link leading out of it.
    #[error(
        "{path} leads out of the directory being added (to {target}); a model holds only files under it: copy the file in, or remove the link"
    )]
    LinkOutside {
        /// The link.
        path: PathBuf,
        /// Where it leads.
        target: PathBuf,
    },
    /// Too little room left in the store.
    #[error(
        "the model store {dir} would have less than 5% free after this file ({needed} bytes); free space there or ask an admin to move [datasets] models"
    )]
    NoRoom {
        /// The store.
        dir: PathBuf,
        /// The bytes of the file.
        needed: u64,
    },
    /// A source with nothing to add.
    #[error("{0} holds no files to add as a model")]
    Empty(PathBuf),
    /// More files than a revision may hold.
    #[error("{dir} holds more than {max} files; a model revision may hold at most that many")]
    TooManyFiles {
        /// The source.
        dir: PathBuf,
        /// The limit.
        max: usize,
    },
    /// A file larger than the store takes.
    #[error(
        "{path} is {size} bytes, more than the largest file a model may hold ({max} bytes); split it, as the hub's sharded checkpoints are"
    )]
    TooLarge {
        /// The file, as the stream named it.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A stream that is not what the exporter writes.
    #[error("the model stream is malformed: {0}")]
    Malformed(String),
    /// A filesystem call failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl HubError {
    /// An I/O error at `path`.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> HubError {
        HubError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
