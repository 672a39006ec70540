//! `labpool demo` and `labpool sim`: trying labpool, and replaying a trace.

use clap::Args;

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
    /// Dataset cache (local SSD) per node (binary units, as everywhere: 1G is 1024M)
    #[arg(long, value_name = "SIZE", default_value = "200G")]
    pub ssd: String,
    /// Shared storage bandwidth, split among transfers in flight (a small lab's NFS: 1 GbE)
    #[arg(long, value_name = "RATE", default_value = "1Gbit")]
    pub shared_bw: String,
    /// Each node's SSD write bandwidth
    #[arg(long, value_name = "RATE", default_value = "16Gbit")]
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
