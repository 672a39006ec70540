//! The command line, as clap definitions only. Commands live in [`crate::commands`].
//!
//! [`Cli`] and [`Command`] are here; each group of subcommands has its arguments in a file of
//! its own, re-exported here, so every type stays at `crate::args::X`.

mod datasets;
mod demo;
mod envs;
mod init;
mod jobs;
mod models;
mod nodes;
mod policy;
mod quotas;
mod reservations;
mod snapshots;
pub mod values;

pub use datasets::{CacheCommand, DatasetCommand};
pub use demo::{DemoArgs, SimArgs};
pub use envs::EnvCommand;
pub use init::InitArgs;
pub use jobs::{
    CancelArgs, CancelJobArgs, HistoryArgs, NotebookArgs, QueueArgs, RunArgs, ShowArgs, SubmitArgs,
    UpdateArgs,
};
pub use models::ModelCommand;
pub use nodes::{NodeCommand, PartitionCommand};
pub use policy::{AccountCommand, CreditsArgs, CreditsCommand, QosCommand};
pub use quotas::{LimitArgs, PurgeCommand, QuotaArgs, QuotaCommand};
pub use reservations::ReservationCommand;
pub use snapshots::SnapshotCommand;

use crate::env_vars;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// labpool: one shared GPU pool for a research group.
#[derive(Parser, Debug)]
#[command(
    name = "labpool",
    version,
    about,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Config file [default: $LABPOOL_CONFIG, else /etc/labpool/labpool.toml]
    #[arg(long, global = true, env = env_vars::LABPOOL_CONFIG, hide_env = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the resolved settings (the config file after defaults, path resolution and
    /// checks) as JSON, and exit without doing anything else
    #[arg(long, global = true, hide = true)]
    pub show_settings: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `labpool alloc`'s command with its arguments, as `salloc` reads them: the subcommand
/// itself is built only when run (see [`Command`]).
pub fn alloc_command() -> clap::Command {
    <RunArgs as clap::Args>::augment_args(clap::Command::new("alloc"))
}

/// Subcommands.
///
/// Each is built only when it is the one being run (`defer`): building all of them took about
/// a third of every CLI process's start (docs/benchmarks.md). A deferred subcommand's
/// argument type applies its own doc comment after the variant's description, so the
/// argument types of these variants carry plain comments (`//`), never doc comments: the
/// variant's comment is the command's `--help` text. What reads the whole tree sees a deferred
/// subcommand's arguments only once clap builds it: `salloc` takes `labpool alloc`'s from
/// [`alloc_command`]; the man pages are the same as before; the shell completions no longer
/// complete `labpool help CMD SUBCMD` (`labpool help` itself is unchanged).
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub enum Command {
    /// Write a working config for this machine into DIR
    Init(InitArgs),
    /// Run the controller, with this node's agent in-process
    Serve,
    /// Run this node's agent: join the controller named under [agent] in the config
    Agent,
    /// Queue a job script (or a command with --wrap); #SBATCH and #LABPOOL lines are read
    #[command(infer_long_args = true)]
    Submit(Box<SubmitArgs>),
    /// Jobs waiting and running
    Queue(QueueArgs),
    /// Why a job waits: its tier, priority factors, and what each placement stage rejected
    Why(ShowArgs),
    /// One job in detail, with its history of events
    Show(ShowArgs),
    /// Cancel jobs, or send them a signal (--signal)
    Cancel(CancelJobArgs),
    /// An interactive session: a shell (or COMMAND) on a terminal inside a job (--pty)
    #[command(infer_long_args = true)]
    Run(Box<RunArgs>),
    /// An allocation: a shell inside a job whose `srun` runs steps on it (salloc)
    #[command(infer_long_args = true)]
    Alloc(Box<RunArgs>),
    /// JupyterLab inside a job, opened in the browser through the dashboard
    #[command(infer_long_args = true)]
    Notebook(Box<NotebookArgs>),
    /// Hosts a notebook inside its job (started by `labpool notebook`)
    #[command(hide = true)]
    NotebookHost {
        /// Stop JupyterLab after this long without activity, where the controller cannot be
        /// reached.
        #[arg(long, value_parser = labpool_units::parse_duration)]
        idle: std::time::Duration,
    },
    /// A port of a running job (TensorBoard, a notebook, a demo) on this machine's 127.0.0.1
    Forward {
        /// The job
        #[arg(value_name = "JOB")]
        job: String,
        /// The port the server in the job listens on
        port: u16,
        /// The port on this machine [default: PORT]; 0 picks a free one
        local: Option<u16>,
    },
    /// Join a running session again (after Ctrl-] d or a lost terminal), from any node
    Attach {
        /// The session's job id (JOB.STEP as sattach writes it is taken too)
        #[arg(value_name = "JOB")]
        job: String,
    },
    /// Hosts an interactive session inside its job (started by `labpool run`)
    #[command(hide = true)]
    SessionHost {
        /// The Unix socket the client attaches to.
        #[arg(long)]
        socket: std::path::PathBuf,
        /// End the session after this long without input.
        #[arg(long, value_parser = labpool_units::parse_duration)]
        idle: std::time::Duration,
        /// The command [default: $SHELL].
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Holds a sliced job to its slice and runs COMMAND (a batch script over Slurm)
    #[command(hide = true)]
    SliceExec {
        /// The slice's memory, MiB.
        #[arg(long)]
        mib: u64,
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Change a waiting job: its time limit, partition or dependencies
    Update(UpdateArgs),
    /// Stop running jobs and queue them again under the same ids
    Requeue(CancelArgs),
    /// Hold waiting jobs: they stay queued but do not start until released
    Hold(CancelArgs),
    /// Link Slurm's command names (sbatch, squeue, scancel, sinfo, sacct, scontrol, srun, salloc, sattach) to labpool in DIR
    InstallSlurmCommands {
        /// Where to make the links (e.g. /usr/local/bin)
        dir: std::path::PathBuf,
    },
    /// Write the man pages into DIR: labpool(1), labpool-COMMAND(1), and labpool-sbatch(1) and the other Slurm names, with what labpool does with each Slurm option
    ManPages {
        /// Where to write them (e.g. /usr/local/share/man/man1)
        dir: std::path::PathBuf,
    },
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell)
    Completions {
        /// The shell to complete for
        shell: clap_complete::Shell,
    },
    /// Release held jobs
    Release(CancelArgs),
    /// Finished jobs: state, exit code, elapsed time, GPUs
    History(HistoryArgs),
    /// Nodes and their GPUs
    Nodes(JsonArg),
    /// Alerts firing now (hot GPUs, lost nodes, full disks, zombie jobs, ...) and pending
    Alerts(AlertsArgs),
    /// A one-time URL that logs your browser in to the web dashboard
    Web(WebArgs),
    /// Usage report for the lab and its funding body: GPU-hours, waits, outcomes, credits,
    /// energy, leaderboard, as HTML, CSV or JSON (admins)
    Report(ReportArgs),
    /// Your GPU-hours, utilisation, waits, credits and storage this month, against last month
    Usage(UsageArgs),
    /// The weekly health check in one command: nodes, queue, disks, GPUs, clocks, config,
    /// snapshots, quotas, mounts; exits 1 when something needs a person (admins)
    Doctor(DoctorArgs),
    /// Before an upgrade, run by the new binary: the migrations it will apply to the state
    /// database, the agents it would refuse, the running jobs; exits 1 when something blocks
    /// the upgrade (admins)
    UpgradeCheck {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// The controller's own state: a consistent backup while it runs, and a restore (admins)
    State {
        /// What to do.
        #[command(subcommand)]
        command: StateCommand,
    },
    /// The daemon's log on this machine, across its rotated files, by job, node or time (admins)
    Logs(LogsArgs),
    /// Drain a node for maintenance or resume it (admins)
    Node {
        /// What to do.
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Partitions (queues)
    Partition {
        /// What to do.
        #[command(subcommand)]
        command: PartitionCommand,
    },
    /// Accounts (research groups) and their members (changes: admins)
    Account {
        /// What to do.
        #[command(subcommand)]
        command: AccountCommand,
    },
    /// Reservations: GPUs booked ahead for a demo or a deadline (changes: admins)
    Reservation {
        /// What to do.
        #[command(subcommand)]
        command: ReservationCommand,
    },
    /// QOS limits on accounts and users, with Slurm's names (changes: admins)
    Qos {
        /// What to do.
        #[command(subcommand)]
        command: QosCommand,
    },
    /// Credits: this month's balance, charges and emergency tokens; `grant` (admins)
    Credits(CreditsArgs),
    /// Datasets jobs declare with --dataset: register, list, rescan (changes: admins)
    Dataset {
        /// What to do.
        #[command(subcommand)]
        command: DatasetCommand,
    },
    /// Model weights jobs read with --model, staged in the Hugging Face hub's layout: add, list
    Model {
        /// What to do.
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Your disk usage against your home and scratch limits, and where the space went
    Quota(QuotaArgs),
    /// Delete old files from scratch, after a plan and a confirmation (admins)
    Purge {
        /// What to purge.
        #[command(subcommand)]
        command: PurgeCommand,
    },
    /// Snapshots of shared data: find and restore deleted files; create, forget, prune, check
    /// (admins)
    Snapshot {
        /// What to do.
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// Software environments jobs run inside with --env: venv, conda, container, modules
    Env {
        /// What to do.
        #[command(subcommand)]
        command: EnvCommand,
    },
    /// Node dataset caches: what is staged where; verify and warm-up (admins)
    Cache {
        /// What to do.
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// Try labpool: a throwaway pool runs a few jobs that contend for GPUs, then stops
    Demo(DemoArgs),
    /// Replay a job trace through the scheduler with a simulated clock, comparing policies
    Sim(SimArgs),
    /// Run one job attempt (started by the node agent; not for people)
    #[command(hide = true)]
    Shim {
        /// The attempt's spool directory.
        dir: PathBuf,
    },
}

// `labpool report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A month, YYYY-MM [default: last month]
    #[arg(long, value_name = "YYYY-MM")]
    pub month: Option<String>,
    /// First day of a range, YYYY-MM-DD (with --to)
    #[arg(long, value_name = "DATE")]
    pub from: Option<String>,
    /// Last day of the range, included
    #[arg(long, value_name = "DATE")]
    pub to: Option<String>,
    /// html (one page, printable to PDF), csv (a figure a line) or json
    #[arg(long, value_enum, default_value = "html")]
    pub format: crate::commands::reports::Format,
    /// Write to FILE instead of standard output
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// Add a what-if section: the range's GPU jobs replayed on today's pool and with these
    /// nodes added, e.g. +2x8:a100 (as `labpool sim --from-history --nodes`)
    #[arg(long, value_name = "+COUNTxGPUS[:TYPE]")]
    pub what_if: Option<String>,
}

// `labpool usage`.
#[derive(Args, Debug)]
pub struct UsageArgs {
    /// Whose (admins; members see their own)
    #[arg(long)]
    pub user: Option<String>,
    /// The month, YYYY-MM [default: this month]
    #[arg(long, value_name = "YYYY-MM")]
    pub month: Option<String>,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

// `labpool web`.
#[derive(Args, Debug)]
pub struct WebArgs {
    /// Open this dashboard page after login, e.g. /queue or /jobs/12
    #[arg(long, value_name = "PATH")]
    pub next: Option<String>,
    /// Print JSON instead of the URL
    #[arg(long)]
    pub json: bool,
}

// `labpool state`.
#[derive(Subcommand, Debug)]
pub enum StateCommand {
    /// Copy the state database (consistently, while the controller runs), the config and the
    /// cluster key into DIR [default: STATE_DIR/backup, also snapshotted into the snapshot
    /// repository when snapshots are on]
    Backup {
        /// Where to write the backup (an absolute path, created mode 0700)
        #[arg(long, value_name = "DIR")]
        to: Option<std::path::PathBuf>,
        /// Print JSON instead of a summary
        #[arg(long)]
        json: bool,
    },
    /// Put a backup's database back as this config's state (the controller stopped); on a
    /// machine with no config yet, the backup's config and cluster key too
    Restore {
        /// The backup's directory (holding labpool.db)
        #[arg(required_unless_present = "from_repo", conflicts_with = "from_repo")]
        from: Option<std::path::PathBuf>,
        /// Take the backup from a snapshot repository instead: the one on another disk, or a
        /// copy brought back with `labpool snapshot fetch` (its newest labpool-state snapshot)
        #[arg(long, value_name = "REPO")]
        from_repo: Option<std::path::PathBuf>,
        /// With --from-repo: which snapshot (an id, a date, `yesterday`) [default: the newest]
        #[arg(long, requires = "from_repo")]
        at: Option<String>,
        /// Replace a state database that is there
        #[arg(long)]
        force: bool,
    },
}

// `labpool logs`.
#[derive(Args, Debug)]
pub struct LogsArgs {
    /// Only lines about this job
    #[arg(long, value_name = "ID")]
    pub job: Option<u64>,
    /// Only lines about this node
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Only lines from this time on: 2026-12-01, 2026-12-01T09:00, today, yesterday, 2h, 3d
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only the last N lines that match
    #[arg(short = 'n', long, value_name = "N")]
    pub lines: Option<usize>,
    /// Print JSON instead of the lines
    #[arg(long)]
    pub json: bool,
}

// `labpool doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
    /// Name jobs waiting longer than this many hours
    #[arg(long, value_name = "HOURS", default_value_t = 24.0)]
    pub waiting_hours: f64,
    /// Name jobs running longer than this many days
    #[arg(long, value_name = "DAYS", default_value_t = 7.0)]
    pub running_days: f64,
}

// `labpool alerts`.
#[derive(Args, Debug)]
pub struct AlertsArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
    /// Also list the alerts resolved lately
    #[arg(long)]
    pub all: bool,
}

// `--json`.
#[derive(Args, Debug)]
pub struct JsonArg {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}
