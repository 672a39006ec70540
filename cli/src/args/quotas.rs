//! `labpool quota` and `labpool purge`: disk limits and the scratch purge.

use clap::{Args, Subcommand};

// `labpool quota`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct QuotaArgs {
    /// What to do [default: show your own quota]
    #[command(subcommand)]
    pub command: Option<QuotaCommand>,
    /// Another user's quota (admins)
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

// `labpool quota ...`.
#[derive(Subcommand, Debug)]
pub enum QuotaCommand {
    /// Set a user's limits (admins): --home/--scratch SIZE for hard byte limits, or --fs with
    /// --soft/--hard/--files-soft/--files-hard/--grace
    Set {
        /// Login name
        user: String,
        /// The limits
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Set the limits of users who have none of their own (admins); same flags as `set`
    Default {
        /// The limits
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Every user's usage against their limits, fullest first (admins)
    Report {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Count usage now, with a progress bar (home and scratch, or one)
    Scan {
        /// home or scratch
        #[arg(long, value_name = "NAME")]
        fs: Option<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}

/// Limits as typed: sizes in K/M/G/T (binary, as `du -h` prints them), `none` for no limit.
#[derive(Args, Debug, Default, Clone)]
pub struct LimitArgs {
    /// Hard byte limit on home
    #[arg(
        allow_hyphen_values = true,
        long,
        value_name = "SIZE",
        conflicts_with = "fs"
    )]
    pub home: Option<String>,
    /// Hard byte limit on scratch
    #[arg(
        allow_hyphen_values = true,
        long,
        value_name = "SIZE",
        conflicts_with = "fs"
    )]
    pub scratch: Option<String>,
    /// The file system the flags below apply to: home or scratch
    #[arg(long, value_name = "NAME")]
    pub fs: Option<String>,
    /// Soft byte limit: over it, new jobs are warned until the grace period ends
    #[arg(allow_hyphen_values = true, long, value_name = "SIZE", requires = "fs")]
    pub soft: Option<String>,
    /// Hard byte limit: at or over it, new jobs are refused
    #[arg(allow_hyphen_values = true, long, value_name = "SIZE", requires = "fs")]
    pub hard: Option<String>,
    /// Soft limit on files (entries)
    #[arg(allow_hyphen_values = true, long, value_name = "N", requires = "fs")]
    pub files_soft: Option<String>,
    /// Hard limit on files (entries)
    #[arg(allow_hyphen_values = true, long, value_name = "N", requires = "fs")]
    pub files_hard: Option<String>,
    /// How long usage may stay over a soft limit (e.g. 7d)
    #[arg(long, value_name = "DURATION", requires = "fs")]
    pub grace: Option<String>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

// `labpool purge ...`.
#[derive(Subcommand, Debug)]
pub enum PurgeCommand {
    /// Delete files in scratch untouched for longer than [purge] max_age; owners of files that
    /// pass it soon get a notice
    Scratch {
        /// Print the plan (files and bytes per user, the oldest files) and delete nothing
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation (for cron and scripts)
        #[arg(long)]
        yes: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}
