//! `labpool demo` and `labpool sim`: trying labpool, and replaying a trace.

use clap::Args;

// `labpool demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keep the temporary directory (config, database, job output) afterwards
    #[arg(long)]
    pub keep: bool,
}

// `labpool sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Job trace (CSV: job_id,submit_s,user,gpus,dataset,job_type,dur_v100_s,dur_p100_s,dur_k80_s,
    /// and optionally slice: D for a one-GPU job that fits 1/D of a card)
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present_any = ["sweep", "from_history"],
        requires = "datasets"
    )]
    pub trace: Option<std::path::PathBuf>,
    /// Replay the jobs this pool ran in a month (--month) on today's pool, and on a proposed
    /// one given as --nodes +COUNTxGPUS (e.g. +2x8:a100), next to the waits they really had
    #[arg(long, conflicts_with_all = ["trace", "sweep", "accounts"])]
    pub from_history: bool,
    /// With --from-history: the month, YYYY-MM [default: last month]
    #[arg(long, value_name = "YYYY-MM", requires = "from_history")]
    pub month: Option<String>,
    /// Dataset sizes (CSV: dataset,bytes,...)
    #[arg(long, value_name = "FILE", requires = "trace")]
    pub datasets: Option<std::path::PathBuf>,
    /// Nodes: COUNTxGPUS:TYPE groups, comma-separated (COUNTxGPUS:TYPE/D cuts their cards into
    /// 1/D slices, for trace jobs with a slice column); with --from-history, +COUNTxGPUS adds to
    /// today's pool
    #[arg(long, value_name = "SPEC", default_value = "8x8:v100")]
    pub nodes: String,
    /// Dataset cache (local SSD) per node (binary units, as everywhere: 1G is 1024M)
    #[arg(long, value_name = "SIZE", default_value = "200G")]
    pub ssd: String,
    /// Shared storage bandwidth, split among transfers in flight (a small lab's NFS: 1 GbE)
    #[arg(long, value_name = "RATE", default_value = "1Gbit")]
    pub shared_bw: String,
    /// Each node's SSD write bandwidth
    #[arg(long, value_name = "RATE", default_value = "16Gbit")]
    pub ssd_bw: String,
    /// Each node's network link, which copies from peers share
    #[arg(long, value_name = "RATE", default_value = "10Gbit")]
    pub nic_bw: String,
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
    /// Print where and when each job ran under each policy instead of the figures, and what
    /// the caches copied and evicted (to compare with a real pool's own record)
    #[arg(long, conflicts_with_all = ["sweep", "accounts", "users"])]
    pub placements: bool,
    /// Split the trace's users into N accounts with equal GrpTRES shares, and compare the
    /// labpool policy under strict caps with borrowing beyond the shares and preemption
    #[arg(long, value_name = "N")]
    pub accounts: Option<usize>,
    /// With --accounts: each account is away in turn for this long (its jobs dropped from the
    /// trace), as groups are around deadlines and holidays: 7d, 36h
    #[arg(long, value_name = "DURATION", requires = "accounts")]
    pub away: Option<String>,
    /// With --accounts: each account keeps this many GPUs of its unused share free for its own
    /// returning jobs instead of lending them (LendLimit = share - N)
    #[arg(long, value_name = "N", default_value_t = 0, requires = "accounts")]
    pub keep: u32,
    /// Compare the policies over N generated lab-like traces (and the --trace given, with
    /// its --nodes and --ssd), one row per trace, each figure against fifo's
    #[arg(long, value_name = "N", conflicts_with = "accounts",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub sweep: Option<usize>,
    /// With --sweep: jobs per generated trace
    #[arg(long, value_name = "N", default_value_t = 2000, requires = "sweep",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub sweep_jobs: usize,
    /// One JSON object per policy, one per line
    #[arg(long)]
    pub json: bool,
}
