//! `labpool dataset` and `labpool cache`: registered data and the node caches.

use super::JsonArg;
use clap::Subcommand;
use std::path::PathBuf;

// `labpool dataset`.
#[derive(Subcommand, Debug)]
pub enum DatasetCommand {
    /// Check that members can write nothing under the registered datasets (the datasets root
    /// when none is registered); --fix takes the write bits off and gives member-owned entries
    /// to root (admins)
    Audit {
        /// Fix what is found
        #[arg(long)]
        fix: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Register a directory under the datasets root; it becomes read-only for members
    Add {
        /// Name jobs declare it by (--dataset NAME)
        name: String,
        /// Source directory
        path: PathBuf,
        /// What it is
        #[arg(long, default_value = "")]
        description: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Registered datasets with their current version and size
    List(JsonArg),
    /// One dataset in detail
    Show {
        /// Name
        name: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// A dataset's versions, newest first
    Versions {
        /// Name
        name: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Record a new version if the source changed (size and mtime quick check, then hashing
    /// only what changed)
    Rescan {
        /// Name
        name: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}

// `labpool cache`.
#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// Versions staged on each node, with bytes, pins, last use and hit counts
    Status {
        /// One node
        #[arg(long)]
        node: Option<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Re-hash every staged file; files that do not match are staged again
    Verify {
        /// One node
        #[arg(long)]
        node: Option<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Stage a dataset's current version ahead of jobs, with a progress bar
    Stage {
        /// Dataset
        name: String,
        /// One node [default: every node]
        #[arg(long)]
        node: Option<String>,
    },
}
