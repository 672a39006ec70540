//! The submit options a job can carry, shared by the command line and by `#SBATCH`/`#LABPOOL`
//! lines in the script, and their resolution into a typed [`JobRequest`].

mod error;
pub mod ignored;
mod mail;
mod pattern;
mod request;
mod resolve;
mod slurm;

pub use error::OptionError;
pub use mail::{MailType, parse_mail_types};
pub use pattern::{BATCH_STEP, PatternValues, expand_pattern};
pub use request::{JobRequest, check_name};
pub use slurm::{SignalSpec, SlurmOptions, parse_signal};

// Submit options as Slurm's `sbatch` spells them. Every field is optional so that the command
// line, the script's directives and defaults can be layered. (A plain comment: clap would show a
// doc comment as the `--help` text of the deferred commands that flatten these options.)
#[allow(missing_docs)]
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOptions {
    /// Job name [default: the script's file name, or "wrap"]
    #[arg(short = 'J', long = "job-name", value_name = "NAME")]
    pub job_name: Option<String>,
    /// GPUs, Slurm style: gpu:N, gpu:TYPE:N or gpu:TYPE; part of one card with its memory: a
    /// slice gpu:TYPE.D:1 (gpu:rtx4090.4:1 is a quarter) or shard:N
    #[arg(long, value_name = "gpu[:TYPE]:N")]
    pub gres: Option<String>,
    /// GPUs for the whole job: N, TYPE:N or a slice TYPE.D:1, spread evenly over its nodes
    #[arg(short = 'G', long, value_name = "[TYPE:]N")]
    pub gpus: Option<String>,
    /// GPUs on each node: N or TYPE:N
    #[arg(long = "gpus-per-node", value_name = "[TYPE:]N")]
    pub gpus_per_node: Option<String>,
    /// CPU cores for the job [default: 1]
    #[arg(short = 'c', long = "cpus-per-task", value_name = "N")]
    pub cpus_per_task: Option<u32>,
    /// Memory: megabytes, or a K/M/G/T suffix (32G) [default: not reserved]
    #[arg(long, value_name = "SIZE")]
    pub mem: Option<String>,
    /// Time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS [default: the partition's]
    #[arg(short = 't', long, value_name = "TIME")]
    pub time: Option<String>,
    /// Standard output file; %j is the job id, %x the job name [default: labpool-%j.out]
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<String>,
    /// Standard error file [default: with standard output]
    #[arg(short = 'e', long, value_name = "FILE")]
    pub error: Option<String>,
    /// Partition (queue) [default: the configured default]
    #[arg(short = 'p', long, value_name = "NAME")]
    pub partition: Option<String>,
    /// Working directory [default: where you submit]
    #[arg(short = 'D', long, value_name = "DIR")]
    pub chdir: Option<String>,
    /// Environment: ALL, NONE, or NAME[=value] items [default: ALL]
    #[arg(long, value_name = "ALL|NONE|VARS")]
    pub export: Option<String>,
    /// Nodes: N, or MIN-MAX (the job gets MIN) [default: as many as --ntasks-per-node needs, or 1]
    #[arg(short = 'N', long, value_name = "N")]
    pub nodes: Option<String>,
    /// Tasks; the job gets tasks x cpus-per-task cores
    #[arg(short = 'n', long, value_name = "N")]
    pub ntasks: Option<u32>,
    /// Tasks on each node: --ntasks is N x the nodes (or the nodes are --ntasks / N)
    #[arg(long = "ntasks-per-node", value_name = "N")]
    pub ntasks_per_node: Option<u32>,
    /// Tell the member when the job begins, ends, fails, is requeued or nears its time limit:
    /// NONE, BEGIN, END, FAIL, REQUEUE, ALL, TIME_LIMIT, TIME_LIMIT_90/80/50 (comma-separated)
    #[arg(long = "mail-type", value_name = "TYPE")]
    pub mail_type: Option<String>,
    /// Who is told: an e-mail address, or a login name [default: you]
    #[arg(long = "mail-user", value_name = "ADDR")]
    pub mail_user: Option<String>,
    /// Account (research group) to run under [default: your first account]
    #[arg(short = 'A', long, value_name = "ACCOUNT")]
    pub account: Option<String>,
    /// Accepted for Slurm scripts; labpool's limits come from accounts and users, not named QOS
    #[arg(short = 'q', long, value_name = "QOS", hide = true)]
    pub qos: Option<String>,
    /// Wait for other jobs: afterok:N[:M], afterany:N, afternotok:N, comma-separated
    #[arg(short = 'd', long, value_name = "TYPE:JOB[:JOB]")]
    pub dependency: Option<String>,
    /// A job array: 0-9, 1,3,5-7 or 0-15:4, with %N to run at most N at once
    #[arg(short = 'a', long, value_name = "INDEXES")]
    pub array: Option<String>,
    /// A dataset the job reads (repeat for several)
    #[arg(long = "dataset", value_name = "NAME")]
    pub datasets: Vec<String>,
    /// A model the job reads, from the lab model cache (`labpool model list`): ORG/NAME,
    /// staged on its node in the Hugging Face hub's layout (repeat for several)
    #[arg(long = "model", value_name = "ORG/NAME")]
    pub models: Vec<String>,
    /// The software environment to run inside (`labpool env list`)
    #[arg(long, value_name = "NAME")]
    pub env: Option<String>,
    /// Spend one of this month's emergency tokens: the job goes first in line
    #[arg(long)]
    pub emergency: bool,
    /// Let the job be stopped and requeued when others need its GPUs (after its first 10
    /// minutes, with notice); it is charged less, at the pool's preemptible rate
    #[arg(long)]
    pub preemptible: bool,
    /// Share each GPU with other --gpu-share jobs, up to the GPU's configured `share` (for small
    /// jobs); on a sliced card, one shard of it with its memory
    #[arg(long = "gpu-share")]
    pub gpu_share: bool,
    /// Never run this job again after its node fails: it ends NODE_FAIL instead of being
    /// requeued (for jobs that must not repeat side effects)
    #[arg(long = "no-requeue")]
    pub no_requeue: bool,
    /// Accepted for Slurm scripts; requeueing after a node failure is the default
    #[arg(long, hide = true)]
    pub requeue: bool,
    /// Accepted for Slurm scripts; ignored (a job holds only what it asks for)
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "node", hide = true)]
    pub exclusive: Option<String>,
    /// The rest of sbatch's options (per-task and per-GPU resources, --signal, --open-mode…).
    #[command(flatten)]
    pub slurm: SlurmOptions,
}

/// `--nodes`: `N`, or `MIN-MAX`, of which a job gets MIN (labpool does not grow a job to
/// what is free, as Slurm may).
pub fn parse_node_count(text: &str) -> Result<u32, OptionError> {
    let bad = || {
        OptionError::Unsupported(format!(
            "--nodes {text:?}: write a count (2) or a range (2-4), at least 1"
        ))
    };
    let min = text.trim().split('-').next().unwrap_or_default();
    match min.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(bad()),
    }
}

impl JobOptions {
    /// Layers `over` on top of `self`: every option `over` sets wins.
    pub fn overlay(self, over: JobOptions) -> JobOptions {
        // --gres and --gpus are two spellings of one request: the upper layer's wins whole.
        let over_gpus = over.gres.is_some() || over.gpus.is_some() || over.gpus_per_node.is_some();
        JobOptions {
            job_name: over.job_name.or(self.job_name),
            gres: if over_gpus { over.gres } else { self.gres },
            gpus: if over_gpus { over.gpus } else { self.gpus },
            gpus_per_node: if over_gpus {
                over.gpus_per_node
            } else {
                self.gpus_per_node
            },
            cpus_per_task: over.cpus_per_task.or(self.cpus_per_task),
            mem: over.mem.or(self.mem),
            time: over.time.or(self.time),
            output: over.output.or(self.output),
            error: over.error.or(self.error),
            partition: over.partition.or(self.partition),
            chdir: over.chdir.or(self.chdir),
            export: over.export.or(self.export),
            nodes: over.nodes.or(self.nodes),
            ntasks: over.ntasks.or(self.ntasks),
            ntasks_per_node: over.ntasks_per_node.or(self.ntasks_per_node),
            mail_type: over.mail_type.or(self.mail_type),
            mail_user: over.mail_user.or(self.mail_user),
            account: over.account.or(self.account),
            qos: over.qos.or(self.qos),
            dependency: over.dependency.or(self.dependency),
            array: over.array.or(self.array),
            datasets: if over.datasets.is_empty() {
                self.datasets
            } else {
                over.datasets
            },
            models: if over.models.is_empty() {
                self.models
            } else {
                over.models
            },
            emergency: over.emergency || self.emergency,
            preemptible: over.preemptible || self.preemptible,
            gpu_share: over.gpu_share || self.gpu_share,
            // `--requeue` on the command line undoes a script's `--no-requeue`.
            no_requeue: (over.no_requeue || self.no_requeue) && !over.requeue,
            requeue: over.requeue || self.requeue,
            env: over.env.or(self.env),
            exclusive: over.exclusive.or(self.exclusive),
            slurm: self.slurm.overlay(over.slurm),
        }
    }
}

#[cfg(test)]
mod tests;
