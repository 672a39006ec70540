//! Jobs: `submit`, `queue`, `show` and `why`, `cancel`, `history`.

use clap::Args;
use labpool_scheduler::options::JobOptions;
use std::path::PathBuf;

// `labpool submit`.
#[derive(Args, Debug, Clone)]
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
    /// Check the job and say where and when it would start; queue nothing
    #[arg(long)]
    pub test_only: bool,
    /// Wait for the job (every task of an array) to end, and exit with its exit code
    #[arg(short = 'W', long, conflicts_with = "test_only")]
    pub wait: bool,
    /// With --test-only: print JSON (the resources the job would get, and its start)
    #[arg(long, requires = "test_only")]
    pub json: bool,
    /// The job script (sbatch: read from standard input when none is given)
    #[arg(value_name = "SCRIPT")]
    pub script: Option<PathBuf>,
    /// The script sbatch read from standard input, when it was given none.
    #[arg(skip)]
    pub stdin_script: Option<String>,
    /// Arguments for the script
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
}

// `labpool queue`.
#[derive(Args, Debug)]
pub struct QueueArgs {
    /// Only my jobs
    #[arg(long, conflicts_with = "user")]
    pub me: bool,
    /// Only this user's jobs
    #[arg(long, short = 'u', value_name = "USER", value_parser = super::values::login_name)]
    pub user: Option<String>,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

// `labpool show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Job id
    #[arg(value_parser = super::values::job_id)]
    pub id: u64,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

// `labpool cancel`, `hold` and `release`.
#[derive(Args, Debug)]
pub struct CancelArgs {
    /// Job ids: N (a job, or a whole array), or ARRAY_TASK such as 12_3
    #[arg(required = true)]
    pub ids: Vec<String>,
}

// `labpool run` and `labpool alloc`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Options, as srun and sbatch spell them.
    #[command(flatten)]
    pub options: JobOptions,
    /// Give the command a terminal: an interactive session
    #[arg(long)]
    pub pty: bool,
    /// The command [default: your shell]
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

// `labpool notebook`.
#[derive(Args, Debug, Clone)]
pub struct NotebookArgs {
    /// Options, as srun and sbatch spell them.
    #[command(flatten)]
    pub options: JobOptions,
    /// Print the job and its link as JSON
    #[arg(long)]
    pub json: bool,
}

// `labpool update`.
#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// Job id
    #[arg(value_parser = super::values::job_id)]
    pub id: u64,
    /// New time limit (as --time)
    #[arg(short = 't', long, value_name = "TIME")]
    pub time: Option<String>,
    /// New partition
    #[arg(short = 'p', long, value_name = "NAME")]
    pub partition: Option<String>,
    /// New dependencies (afterok:12, singleton; "" for none)
    #[arg(short = 'd', long, value_name = "DEPS")]
    pub dependency: Option<String>,
}

// `labpool cancel`: stop jobs, or (`--signal`) send them a signal.
#[derive(Args, Debug)]
pub struct CancelJobArgs {
    /// The jobs.
    #[command(flatten)]
    pub jobs: CancelArgs,
    /// Send this signal (USR1, SIGTERM, 10) instead of cancelling; the job goes on running
    #[arg(short = 's', long, value_name = "SIG")]
    pub signal: Option<String>,
    /// With --signal: to the batch shell alone [default: the steps' tasks, every process of the job but it and srun]
    #[arg(short = 'b', long, requires = "signal", conflicts_with = "full")]
    pub batch: bool,
    /// With --signal: to every process of the job, the batch shell included
    #[arg(short = 'f', long, requires = "signal")]
    pub full: bool,
}

impl CancelJobArgs {
    /// The signal request, when `--signal` was given.
    pub fn signal_request(&self) -> anyhow::Result<Option<crate::api::SignalRequest>> {
        let Some(text) = &self.signal else {
            return Ok(None);
        };
        let spec = labpool_scheduler::options::parse_signal(text)
            .map_err(|e| anyhow::anyhow!("{}", e.replace("--signal", "--signal (scancel -s)")))?;
        let target = match (self.batch, self.full) {
            (true, _) => crate::api::SignalTarget::Batch,
            (_, true) => crate::api::SignalTarget::All,
            _ => crate::api::SignalTarget::Steps,
        };
        Ok(Some(crate::api::SignalRequest {
            ids: self.jobs.ids.clone(),
            signal: spec.signal,
            target,
        }))
    }
}

// `labpool history`.
#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Only this user's jobs (one whose account is gone too: their jobs stay in the history)
    #[arg(long, short = 'u', value_name = "USER")]
    pub user: Option<String>,
    /// Only jobs that ended since: YYYY-MM-DD[THH:MM], today, yesterday, or an age like 3d
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// At most this many jobs, newest first (fetched in pages of 1000)
    #[arg(long, default_value_t = 1000)]
    pub limit: u32,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}
