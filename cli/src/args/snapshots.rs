//! `labpool snapshot`: backups of shared data.

use clap::Subcommand;
use std::path::PathBuf;

// `labpool snapshot`.
#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Back up now (root): every configured source, one of them (--source), or any directory
    /// (--path)
    Create {
        /// A source from [[snapshots.source]] in the config
        #[arg(long, conflicts_with = "path")]
        source: Option<String>,
        /// Any directory, snapshotted ad hoc (source name `path`)
        #[arg(long)]
        path: Option<PathBuf>,
        /// Glob to leave out (with --path; repeatable)
        #[arg(long, requires = "path")]
        exclude: Vec<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Snapshots, oldest first
    List {
        /// Only this source
        #[arg(long)]
        source: Option<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// What a snapshot holds at PATH (default: its root)
    Ls {
        /// Snapshot id (a prefix is enough) or `latest`
        snapshot: String,
        /// Path as it was backed up
        path: Option<PathBuf>,
        /// Everything below, not just one level
        #[arg(long, short)]
        recursive: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// What changed between two snapshots: added (+), removed (-), changed (M), metadata (U)
    Diff {
        /// The older snapshot
        a: String,
        /// The newer snapshot
        b: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// In which snapshots PATH exists, and when it disappeared
    Find {
        /// The file or directory, as it was
        path: PathBuf,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Get a file or directory back, with its mode, owner and mtime
    Restore {
        /// The file or directory, as it was
        path: PathBuf,
        /// Which state: a snapshot id, a date (2026-11-30), `yesterday`, `today` [default: the
        /// newest snapshot that holds PATH]
        #[arg(long)]
        at: Option<String>,
        /// Restore into this existing directory instead of the original place
        #[arg(long)]
        target: Option<PathBuf>,
        /// Replace what exists at the destination
        #[arg(long)]
        overwrite: bool,
        /// Restore from this repository directory (a copy brought back with `snapshot fetch`),
        /// directly and as root, without the controller
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Forget snapshots by a retention policy (root); prints the plan, then applies it.
    /// Without --keep-* flags, the config's policy
    Forget {
        /// Keep the newest N
        #[arg(long)]
        keep_last: Option<u32>,
        /// Keep the newest of each of the last N days
        #[arg(long)]
        keep_daily: Option<u32>,
        /// Keep the newest of each of the last N weeks
        #[arg(long)]
        keep_weekly: Option<u32>,
        /// Keep the newest of each of the last N months
        #[arg(long)]
        keep_monthly: Option<u32>,
        /// Print the plan only
        #[arg(long)]
        dry_run: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Remove data that no snapshot references (root)
    Prune {
        /// Say what would go, remove nothing
        #[arg(long)]
        dry_run: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Check the repository's structure (root); --read-data re-hashes every byte and names
    /// damaged files
    Check {
        /// Read and hash all data
        #[arg(long)]
        read_data: bool,
        /// Check this repository directory (a copy) instead of the config's
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// First rebuild the index from the packs' trailers and the snapshot records (after
        /// the index file was lost or damaged)
        #[arg(long)]
        rebuild_index: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Copy the repository off this box (root): to --to or `[snapshots] copy_to`. Only what
    /// the copy lacks is sent; a copy cut short is finished by the next
    Copy {
        /// A directory, node:NAME (that node's `[agent] snapshot_copy`) or s3://BUCKET/PREFIX
        #[arg(long, value_name = "TARGET")]
        to: Option<String>,
        /// Also remove from the copy what the repository no longer holds (by default a copy
        /// only grows, so a mistaken forget cannot reach it)
        #[arg(long)]
        mirror: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Bring a copy back into a local directory (root), to check it or restore from it with
    /// --repo
    Fetch {
        /// Where the copy is: a directory, node:NAME or s3://BUCKET/PREFIX
        #[arg(long, value_name = "TARGET")]
        from: String,
        /// The local directory (made or completed)
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}
