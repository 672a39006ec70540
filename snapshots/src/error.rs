//! Errors of the snapshot repository. Each says what happened, with the values, and what to do.

use std::path::PathBuf;

/// Everything that can go wrong in the snapshot repository.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// An I/O call failed on a path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The directory is not a labpool snapshot repository.
    #[error(
        "{path} is not a labpool snapshot repository (no readable config: {why}); \
         create one with `labpool snapshot init` or fix [snapshots] repo in the config"
    )]
    NotARepository {
        /// The directory.
        path: PathBuf,
        /// Why the config could not be read.
        why: String,
    },
    /// The repository was written by a newer labpool.
    #[error(
        "the repository at {path} has format version {found}; this labpool reads version {supported}; \
         upgrade labpool"
    )]
    UnsupportedVersion {
        /// The repository.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// Ours.
        supported: u32,
    },
    /// The SQLite index failed.
    #[error(
        "snapshot index {path}: {source}; `labpool snapshot check --rebuild-index` rebuilds it from the packs"
    )]
    Index {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A blob the repository needs is not in the index.
    #[error(
        "blob {id} is not in the repository; run `labpool snapshot check` to see what it affects"
    )]
    MissingBlob {
        /// Its id.
        id: String,
    },
    /// A blob read back does not hash to its id, or a pack is malformed.
    #[error(
        "damaged data in pack {pack}: {what}; `labpool snapshot check --read-data` lists the affected files"
    )]
    Corrupt {
        /// The pack.
        pack: String,
        /// What is wrong.
        what: String,
    },
    /// No snapshot matched a selector.
    #[error("no snapshot matches {selector:?}{hint}")]
    NoSnapshot {
        /// What the user asked for.
        selector: String,
        /// What to try.
        hint: String,
    },
    /// A snapshot selector matches several snapshots.
    #[error("snapshot id prefix {prefix:?} matches {count} snapshots; give more characters")]
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// How many matched.
        count: usize,
    },
    /// A path does not exist in a snapshot (or is not the caller's).
    #[error("{path} is not in {within}{hint}")]
    NotInSnapshot {
        /// The path.
        path: String,
        /// Where it was looked for: `snapshot 1a2b3c4d`, `any snapshot`, `snapshots taken at
        /// or before 2026-11-30 23:59`.
        within: String,
        /// What to try.
        hint: String,
    },
    /// A restore would replace something that exists.
    #[error(
        "{path} exists; labpool does not overwrite by default. Restore elsewhere with \
         `--target DIR`, or replace it with `--overwrite`"
    )]
    TargetExists {
        /// The existing path.
        path: PathBuf,
    },
    /// A restore target that the caller may not write to, or that is not a plain directory.
    #[error("cannot restore into {path}: {why}")]
    BadTarget {
        /// The target.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// The caller may not see or restore a path.
    #[error(
        "{path} belonged to uid {owner} in snapshot {snapshot}, not to you (uid {caller}); ask an admin"
    )]
    NotYours {
        /// The path.
        path: String,
        /// Its owner in the snapshot.
        owner: u32,
        /// The caller.
        caller: u32,
        /// The snapshot.
        snapshot: String,
    },
    /// A name in a tree would escape its directory.
    #[error(
        "refusing the unsafe name {name:?} in a snapshot tree (a damaged or forged repository)"
    )]
    UnsafeName {
        /// The name, lossily.
        name: String,
    },
    /// Bad input from the caller.
    #[error("{0}")]
    Invalid(String),
    /// Another labpool holds the repository lock.
    #[error("the snapshot repository {path} is busy ({what}); wait for it to finish")]
    Busy {
        /// The repository.
        path: PathBuf,
        /// Who holds it.
        what: String,
    },
}

impl SnapshotError {
    /// Wraps an I/O error with the operation and path.
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| SnapshotError::Io { op, path, source }
    }
}

/// Shorthand.
pub type Result<T, E = SnapshotError> = std::result::Result<T, E>;
