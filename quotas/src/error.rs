//! What can go wrong, with the values involved.

use std::path::PathBuf;

/// A quota, scan, purge or audit error.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// A file-system call failed.
    #[error("{path}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A size did not parse.
    #[error(
        "bad size {text:?}: give a whole or decimal number with an optional unit K, M, G or T (binary, as `du -h` prints them), e.g. 500M or 1.5T, or `none`"
    )]
    BadSize {
        /// What was given.
        text: String,
    },
    /// A count did not parse.
    #[error("bad file count {text:?}: give a whole number of 0 or more, or `none`")]
    BadCount {
        /// What was given.
        text: String,
    },
    /// A duration did not parse.
    #[error("bad duration {text:?}: give e.g. 7d, 36h or 30m")]
    BadDuration {
        /// What was given.
        text: String,
    },
    /// A soft limit above its hard limit.
    #[error(
        "the soft limit on {what} ({soft}) is above the hard limit ({hard}); the soft limit must be at most the hard one"
    )]
    SoftAboveHard {
        /// Bytes or files.
        what: &'static str,
        /// Soft, as given.
        soft: String,
        /// Hard, as given.
        hard: String,
    },
    /// A root that is not a directory.
    #[error("{path} is not a directory: {why}")]
    NotADirectory {
        /// The root.
        path: PathBuf,
        /// What it is.
        why: String,
    },
    /// A path outside the root it should be under.
    #[error("{path} is not under {root}")]
    OutsideRoot {
        /// The path.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// A kernel quota tool failed.
    #[error("`{command}` failed: {output}")]
    Tool {
        /// The command line.
        command: String,
        /// What it printed.
        output: String,
    },
}

impl QuotaError {
    /// An I/O error at `path`.
    pub fn io(path: impl Into<PathBuf>, source: impl Into<std::io::Error>) -> QuotaError {
        QuotaError::Io {
            path: path.into(),
            source: source.into(),
        }
    }
}
