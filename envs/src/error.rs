//! What can go wrong with an environment, with the values and what to do next.

use crate::EnvKind;
use crate::tools::Tool;
use std::path::PathBuf;

/// An environment error. Each message says what happened, with the values, then what to do.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A program the environment needs is not installed.
    #[error(
        "{} environments need {}, which was not found on this machine; {}",
        kind.as_str(),
        tool.name(),
        tool.install()
    )]
    MissingTool {
        /// What is missing.
        tool: Tool,
        /// The kind of environment that needs it.
        kind: EnvKind,
    },

    /// A kind word that is not one of the four.
    #[error("unknown environment kind `{word}`; use one of: venv, conda, container, modules")]
    UnknownKind {
        /// What was given.
        word: String,
    },

    /// The kind cannot be told from the spec's name or content.
    #[error(
        "cannot tell what kind of environment {} is; labpool accepts requirements*.txt, *.in or \
         pyproject.toml (venv), environment.yml or .yaml (conda), a .sif or SquashFS image \
         (container), and .modules, modules.txt or a file of `module load` lines (modules); \
         pass `--kind venv|conda|container|modules` to say which",
        path.display()
    )]
    UnknownSpec {
        /// The spec.
        path: PathBuf,
    },

    /// The spec file cannot be read.
    #[error("cannot read the spec {}: {source}; check the path and that you can read it", path.display())]
    UnreadableSpec {
        /// The spec.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// A line of the spec is not acceptable.
    #[error("{} line {line}: `{text}`: {why}; fix that line and lock again", path.display())]
    BadSpecLine {
        /// The spec.
        path: PathBuf,
        /// Line number, from 1.
        line: usize,
        /// The line.
        text: String,
        /// What is wrong with it.
        why: String,
    },

    /// The spec as a whole is not acceptable.
    #[error("{}: {why}", path.display())]
    BadSpec {
        /// The spec.
        path: PathBuf,
        /// What is wrong, and what to do.
        why: String,
    },

    /// A program could not be started at all.
    #[error("cannot run {}: {source}; check that it is installed and executable", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// A step (a tool run) exited unsuccessfully.
    #[error(
        "{step} failed: `{command}` {status}{detail}\nsee the build log for the tool's full output"
    )]
    StepFailed {
        /// What the step was for, e.g. "resolving requirements.txt".
        step: String,
        /// The command line.
        command: String,
        /// How it ended, e.g. "exited with status 1".
        status: String,
        /// The tool's error lines, each on its own line, or empty.
        detail: String,
    },

    /// A locked requirement has no archive hash, so `--require-hashes` cannot install it.
    #[error(
        "{name} {version} cannot be hash-pinned: {why}; install it from an index or a wheel URL \
         (with `#sha256=...`), or drop it from the spec and install it in the job"
    )]
    Unhashed {
        /// Package name.
        name: String,
        /// Version.
        version: String,
        /// Where it came from.
        why: String,
    },

    /// A `module` line of a modules spec failed when tried.
    #[error(
        "`{line}` failed:\n{message}\nrun `module avail` or `module spider NAME` to see what \
         exists, fix the spec and lock again"
    )]
    ModuleFailed {
        /// The failing line.
        line: String,
        /// Lmod's error text.
        message: String,
    },

    /// A container image cannot be opened.
    #[error(
        "container image {} cannot be opened: {source}; check the path (the image must be a \
         .sif or SquashFS file)",
        path.display()
    )]
    ImageMissing {
        /// The image.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// A file given as a container image is neither SIF nor SquashFS.
    #[error(
        "{} is not a SIF or SquashFS image (neither `SIF_MAGIC` nor `hsqs` at its start); make \
         one with `mksquashfs DIR IMAGE.sqfs` or `ch-convert` (Charliecloud) or `apptainer build \
         IMAGE.sif DEF`",
        path.display()
    )]
    NotAnImage {
        /// The file.
        path: PathBuf,
    },

    /// An image's content differs from what was locked.
    #[error(
        "image {} changed since it was locked: its blake3 is {actual}, the lock says {expected}; \
         lock the environment again to use the image as it is now",
        path.display()
    )]
    HashMismatch {
        /// The image.
        path: PathBuf,
        /// Hash in the lock.
        expected: String,
        /// Hash of the file.
        actual: String,
    },

    /// A lock that cannot be built from (edited, or from another version).
    #[error("the lock of environment {id} is unusable: {why}; lock the spec again")]
    BadLock {
        /// The environment id.
        id: String,
        /// What is wrong.
        why: String,
    },

    /// The build directory holds files already.
    #[error(
        "build directory {} is not empty; a build needs an empty directory at the environment's \
         final path: remove what is there and build again",
        path.display()
    )]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },

    /// The build directory belongs to someone else.
    #[error(
        "build directory {} belongs to uid {owner} but the build runs as uid {uid}; builds run \
         as the user who asked, so `chown` the directory to them first",
        path.display()
    )]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Who is building.
        uid: u32,
    },

    /// An archive entry that would land outside the destination.
    #[error(
        "archive {} has an unsafe entry `{entry}` (absolute or with `..`); refusing to unpack it: \
         pack the environment again with labpool",
        archive.display()
    )]
    UnsafeEntry {
        /// The archive.
        archive: PathBuf,
        /// The entry's path.
        entry: String,
    },

    /// A script whose `#!` interpreter cannot be run with its text inside a container.
    #[error(
        "{} starts with `#!{interpreter}`; inside a container labpool runs the script's text with \
         sh, bash, dash, zsh, ksh or python: make the script a shell script that runs the \
         program (e.g. `exec perl prog.pl \"$@\"`)",
        script.display()
    )]
    Interpreter {
        /// The script.
        script: PathBuf,
        /// Its `#!` line, after the `#!`.
        interpreter: String,
    },

    /// Any other I/O failure, with the path.
    #[error("cannot {action} {}: {source}; check the path and its permissions", path.display())]
    Io {
        /// What was being done, e.g. "create directory".
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl EnvError {
    /// An [`EnvError::Io`] for `action` on `path`.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> EnvError {
        let path = path.into();
        move |source| EnvError::Io {
            action,
            path,
            source,
        }
    }
}
