//! What can go wrong in the cache, with the paths involved.

use labpool_units::format_size;
use std::path::PathBuf;

/// A cache or manifest error.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A filesystem call failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A dataset's source does not exist.
    #[error(
        "{path} does not exist; a dataset is a directory under the datasets root ({root}): copy the data there first, then add that directory"
    )]
    MissingSource {
        /// What was given.
        path: PathBuf,
        /// The datasets root.
        root: PathBuf,
    },
    /// The dataset root is not a directory.
    #[error("{path} is not a directory")]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A socket, FIFO or device inside a dataset.
    #[error("{path} is not a file, directory or symlink; datasets hold only those")]
    Special {
        /// The path.
        path: PathBuf,
    },
    /// A name that is not UTF-8.
    #[error("{path}: file names in datasets must be UTF-8")]
    NotUtf8 {
        /// The path.
        path: PathBuf,
    },
    /// The walk failed.
    #[error("walking the dataset failed: {0}")]
    Walk(String),
    /// Walking a version's files in the cache, to measure it, failed.
    #[error(
        "{path}: {source}; the node cache could not be measured (the agent must be able to read every file under the cache directory)"
    )]
    CacheWalk {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The copy workers of a stage could not be started.
    #[error(
        "could not start {workers} copy workers for a stage: {message}; lower `workers` under [cache] in the config"
    )]
    Workers {
        /// Workers asked for.
        workers: usize,
        /// Why not.
        message: String,
    },
    /// The source changed under a stage.
    #[error(
        "{path} changed while it was being staged (its registered version says {expected}); the source must not change between rescans: an admin runs `labpool dataset rescan` after changing it"
    )]
    SourceChanged {
        /// The file.
        path: PathBuf,
        /// What the manifest recorded.
        expected: String,
    },
    /// Not enough room in the cache.
    #[error(
        "the node cache needs {} more but has {} free, and {} is held by versions that running or coming jobs read; the job waits for them to end (or raise capacity under [cache])",
        format_size(*needed),
        format_size(*free),
        format_size(*pinned)
    )]
    NoRoom {
        /// Bytes needed.
        needed: u64,
        /// Bytes free (capacity minus use).
        free: u64,
        /// Bytes held by pinned versions.
        pinned: u64,
    },
    /// A dataset name that breaks the rules.
    #[error(
        "invalid dataset name {name:?}: use letters, digits, '-', '_' and '.', starting with a letter or digit, at most 64 characters"
    )]
    InvalidName {
        /// The name.
        name: String,
    },
    /// A dataset source that is a symlink.
    #[error(
        "{path} is a symlink (to {target}); register the directory itself, which must lie under the datasets root"
    )]
    SymlinkSource {
        /// The path given.
        path: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// A dataset source outside the datasets root.
    #[error(
        "{path} is not under the datasets root {root}; move or copy the data there first (the root is `root` under [datasets] in the config)"
    )]
    OutsideRoot {
        /// The source, resolved.
        path: PathBuf,
        /// The root, resolved.
        root: PathBuf,
    },
    /// A manifest or record did not parse.
    #[error("{path}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// A peer asked for a version this node does not hold completely.
    #[error(
        "dataset {name} version {version} is not staged completely on this node, so it is not served to peers; stage it from the shared source or ask a node that holds it"
    )]
    NotComplete {
        /// Dataset.
        name: String,
        /// Version.
        version: String,
    },
    /// A version name that cannot be one (it becomes a directory name).
    #[error(
        "invalid dataset version {version:?}: a version is the name `labpool dataset list` shows (letters, digits, '-', '_' and '.')"
    )]
    InvalidVersion {
        /// The version asked for.
        version: String,
    },
    /// A peer asked for a path that is not a regular file of a version.
    #[error(
        "{path:?} is not served from dataset {name} version {version}: it is {why}; peers are sent only regular files of the version's manifest, by their relative paths"
    )]
    NotServed {
        /// Dataset.
        name: String,
        /// Version.
        version: String,
        /// The path asked for.
        path: String,
        /// What it is instead.
        why: String,
    },
    /// A file too large to send to a peer from memory.
    #[error(
        "{path:?} is {size} bytes, above the {limit}-byte limit for peer transfers (both ends hold the file in memory); stage it from the shared source"
    )]
    TooLargeForPeer {
        /// The path asked for.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A peer sent something that is not an rsync signature.
    #[error(
        "{path}: the signature sent for a delta does not parse ({message}); send delta::signature of the old file, or ask for the file whole"
    )]
    BadSignature {
        /// The file asked for.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
}

impl CacheError {
    /// An I/O error at `path`.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> CacheError {
        CacheError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
