//! The command line, as clap definitions only. Commands live in [`crate::commands`].

use crate::env_vars;
use clap::{Args, Parser, Subcommand};
use labpool_scheduler::options::JobOptions;
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
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a working config for this machine into DIR
    Init(InitArgs),
    /// Run the controller, with this node's agent in-process
    Serve,
    /// Run this node's agent: join the controller named under [agent] in the config
    Agent,
    /// Queue a job script (or a command with --wrap); #SBATCH and #LABPOOL lines are read
    Submit(Box<SubmitArgs>),
    /// Jobs waiting and running
    Queue(QueueArgs),
    /// Why a job waits: its tier, priority factors, and what each placement stage rejected
    Why(ShowArgs),
    /// One job in detail, with its history of events
    Show(ShowArgs),
    /// Cancel jobs
    Cancel(CancelArgs),
    /// Finished jobs: state, exit code, elapsed time, GPUs
    History(HistoryArgs),
    /// Nodes and their GPUs
    Nodes(JsonArg),
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

/// `labpool init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// Directory for the config, state, socket and log
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Switch on virtual GPUs, for a machine without an NVIDIA driver (e.g. 4:rtx4090)
    #[arg(long, value_name = "N[:TYPE]")]
    pub virtual_gpus: Option<String>,
    /// Node name [default: the host name]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Put the shared file systems (datasets, home, scratch) here [default: DIR/shared]
    #[arg(long, value_name = "PATH")]
    pub shared_root: Option<PathBuf>,
    /// Overwrite an existing DIR/labpool.toml
    #[arg(long)]
    pub force: bool,
    /// Write a node agent's config that joins the controller at HOST:PORT (its `listen`)
    #[arg(long, value_name = "HOST:PORT", requires = "key")]
    pub join: Option<String>,
    /// The controller's cluster.key, copied to this node (with --join)
    #[arg(long, value_name = "FILE", requires = "join")]
    pub key: Option<PathBuf>,
    /// Where the controller takes agents (without --join), or where this agent takes orders
    /// and peers' requests (with --join) [default: agent 0.0.0.0:7071; controller: none]
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
}

/// `labpool submit`.
#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// Options, as sbatch spells them.
    #[command(flatten)]
    pub options: JobOptions,
    /// Run this shell command instead of a script
    #[arg(long, value_name = "CMD", conflicts_with = "script")]
    pub wrap: Option<String>,
    /// Print only the job id
    #[arg(long)]
    pub parsable: bool,
    /// The job script
    #[arg(value_name = "SCRIPT", required_unless_present = "wrap")]
    pub script: Option<PathBuf>,
    /// Arguments for the script
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
}

/// `--json`.
#[derive(Args, Debug)]
pub struct JsonArg {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `labpool queue`.
#[derive(Args, Debug)]
pub struct QueueArgs {
    /// Only my jobs
    #[arg(long, conflicts_with = "user")]
    pub me: bool,
    /// Only this user's jobs
    #[arg(long, short = 'u', value_name = "USER")]
    pub user: Option<String>,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `labpool show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Job id
    pub id: u64,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

/// `labpool cancel`.
#[derive(Args, Debug)]
pub struct CancelArgs {
    /// Job ids: N (a job, or a whole array), or ARRAY_TASK such as 12_3
    #[arg(required = true)]
    pub ids: Vec<String>,
}

/// `labpool history`.
#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Only this user's jobs
    #[arg(long, short = 'u', value_name = "USER")]
    pub user: Option<String>,
    /// Only jobs that ended since: YYYY-MM-DD[THH:MM], today, yesterday, or an age like 3d
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// At most this many jobs, newest first
    #[arg(long, default_value_t = 1000)]
    pub limit: u32,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `labpool partition`.
#[derive(Subcommand, Debug)]
pub enum PartitionCommand {
    /// Partitions with their time limits and priorities
    List(JsonArg),
}

/// `labpool snapshot`.
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
        /// First rebuild the index from the packs' trailers and the snapshot records (after
        /// the index file was lost or damaged)
        #[arg(long)]
        rebuild_index: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}

/// `labpool dataset`.
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

/// `labpool cache`.
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

/// `labpool node ...`.
#[derive(Subcommand, Debug)]
pub enum NodeCommand {
    /// Take no new jobs on NODE; running ones finish (it then shows DRAINED)
    Drain {
        /// Node name (`labpool nodes`)
        node: String,
        /// Why, shown to everyone whose jobs wait
        #[arg(long)]
        reason: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Take jobs on NODE again
    Resume {
        /// Node name
        node: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}

/// `labpool env ...`.
#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// Lock a spec and build it (or reuse the build of the same lock), under NAME
    Create {
        /// The name jobs use with --env (a name you used before moves to the new build)
        name: String,
        /// requirements.txt, pyproject.toml, environment.yml, a .sif or SquashFS image, or a
        /// file of `module load` lines
        #[arg(long, short = 'f', value_name = "SPEC")]
        file: PathBuf,
        /// venv, conda, container or modules [default: from the file]
        #[arg(long, value_name = "KIND")]
        kind: Option<String>,
        /// Publish it for every member (admins)
        #[arg(long)]
        shared: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Your environments and the shared ones
    List {
        /// Every user's (admins)
        #[arg(long)]
        all: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// One environment: its id, lock, size, where it lives and its build log
    Show {
        /// Name (yours first, then shared), or id
        name: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Remove a name; the build goes too when nothing else uses it
    Rm {
        /// Name
        name: String,
        /// The shared name (admins)
        #[arg(long)]
        shared: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Build a locked environment at its path (started by the controller as the user)
    #[command(hide = true)]
    BuildLocked {
        /// The lock, as JSON.
        lock: PathBuf,
        /// Where to build it.
        dest: PathBuf,
    },
}

/// `labpool quota`.
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

/// `labpool quota ...`.
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

/// `labpool purge ...`.
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

/// `labpool demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keep the temporary directory (config, database, job output) afterwards
    #[arg(long)]
    pub keep: bool,
}

/// `labpool sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Job trace (CSV: job_id,submit_s,user,gpus,dataset,job_type,dur_v100_s,dur_p100_s,dur_k80_s)
    #[arg(long, value_name = "FILE")]
    pub trace: std::path::PathBuf,
    /// Dataset sizes (CSV: dataset,bytes,...)
    #[arg(long, value_name = "FILE")]
    pub datasets: std::path::PathBuf,
    /// Nodes: COUNTxGPUS:TYPE groups, comma-separated
    #[arg(long, value_name = "SPEC", default_value = "8x8:v100")]
    pub nodes: String,
    /// Dataset cache (local SSD) per node, decimal units
    #[arg(long, value_name = "SIZE", default_value = "200G")]
    pub ssd: String,
    /// Shared storage bandwidth, split among transfers in flight (a small lab's NFS: 1 GbE)
    #[arg(long, value_name = "RATE", default_value = "1Gbit")]
    pub shared_bw: String,
    /// Each node's SSD write bandwidth
    #[arg(long, value_name = "RATE", default_value = "2GB/s")]
    pub ssd_bw: String,
    /// Policies to compare: fifo, locality, locality+prefetch (the baselines), and labpool
    /// (what `labpool serve` does with the config given by --config)
    #[arg(
        long,
        value_name = "NAME[,NAME...]",
        default_value = "fifo,locality,locality+prefetch"
    )]
    pub policy: String,
    /// Prefetch stages data for jobs predicted to start within this many seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub horizon: u64,
    /// Seed for tie-breaking node order
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also print each policy's per-user figures
    #[arg(long)]
    pub users: bool,
    /// One JSON object per policy, one per line
    #[arg(long)]
    pub json: bool,
}

/// `labpool account`.
#[derive(Subcommand, Debug)]
pub enum AccountCommand {
    /// Create an account
    Add {
        /// Name
        name: String,
        /// What it is for
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Remove an account (its jobs keep running, without its limits)
    Rm {
        /// Name
        name: String,
    },
    /// Accounts, members, limits and GPUs in use
    List(JsonArg),
    /// Add a member
    AddUser {
        /// Account
        account: String,
        /// User
        user: String,
    },
    /// Remove a member
    RmUser {
        /// Account
        account: String,
        /// User
        user: String,
    },
}

/// `labpool qos`.
#[derive(Subcommand, Debug)]
pub enum QosCommand {
    /// Set limits: `qos set ACCOUNT KEY=VALUE...` or `qos set --user U KEY=VALUE...`
    /// (GrpTRES=gres/gpu=N, MaxTRESPerUser=gres/gpu=N, MaxWall=HH:MM:SS, MaxJobsPerUser=N,
    /// MaxSubmitJobsPerUser=N; -1 removes one)
    Set {
        /// Set a user's own limits instead of an account's
        #[arg(long, value_name = "USER")]
        user: Option<String>,
        /// ACCOUNT (without --user), then KEY=VALUE settings
        #[arg(required = true, value_name = "ACCOUNT|KEY=VALUE")]
        items: Vec<String>,
    },
    /// Every limit in force
    List(JsonArg),
}

/// `labpool credits`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CreditsArgs {
    /// Whose credits [default: yours]
    #[arg(long, short = 'u', value_name = "USER")]
    pub user: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Option<CreditsCommand>,
}

/// `labpool credits grant`.
#[derive(Subcommand, Debug)]
pub enum CreditsCommand {
    /// Give a user more credit this month (admins)
    Grant {
        /// User
        user: String,
        /// Credits
        amount: f64,
        /// Why, for the ledger
        #[arg(long)]
        note: Option<String>,
    },
}
