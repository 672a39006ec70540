//! The submit options a job can carry, shared by the command line and by `#SBATCH`/`#LABPOOL`
//! lines in the script, and their resolution into a typed [`JobRequest`].

use crate::array::parse_array;
use crate::dependency::parse_dependencies;
use crate::export::{ExportParseError, ExportPolicy, parse_export};
use crate::gpu::{GpuParseError, GpuRequest, parse_gpus, parse_gres};
use crate::time::{TimeLimit, TimeParseError, parse_time_limit};
use labpool_units::{UnitError, parse_mem_mib};

/// Submit options as Slurm's `sbatch` spells them. Every field is optional so that the command
/// line, the script's directives and defaults can be layered.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOptions {
    /// Job name [default: the script's file name, or "wrap"]
    #[arg(short = 'J', long = "job-name", value_name = "NAME")]
    pub job_name: Option<String>,
    /// GPUs, Slurm style: gpu:N, gpu:TYPE:N or gpu:TYPE
    #[arg(long, value_name = "gpu[:TYPE]:N")]
    pub gres: Option<String>,
    /// GPUs: N or TYPE:N (--gpus-per-node is the same, as a job runs on one node)
    #[arg(
        short = 'G',
        long,
        visible_alias = "gpus-per-node",
        value_name = "[TYPE:]N"
    )]
    pub gpus: Option<String>,
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
    /// Nodes; labpool runs each job on one node, so only 1 is accepted
    #[arg(short = 'N', long, value_name = "1")]
    pub nodes: Option<String>,
    /// Tasks; the job gets tasks x cpus-per-task cores (--ntasks-per-node is the same)
    #[arg(short = 'n', long, alias = "ntasks-per-node", value_name = "N")]
    pub ntasks: Option<u32>,
    /// Accepted for Slurm scripts; labpool sends no mail
    #[arg(long = "mail-type", value_name = "TYPE", hide = true)]
    pub mail_type: Option<String>,
    /// Accepted for Slurm scripts; labpool sends no mail
    #[arg(long = "mail-user", value_name = "ADDR", hide = true)]
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
    /// The software environment to run inside (`labpool env list`)
    #[arg(long, value_name = "NAME")]
    pub env: Option<String>,
    /// Spend one of this month's emergency tokens: the job goes first in line
    #[arg(long)]
    pub emergency: bool,
    /// Share each GPU with other --gpu-share jobs, up to the GPU's configured `share` (for small jobs)
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
}

impl JobOptions {
    /// Layers `over` on top of `self`: every option `over` sets wins.
    pub fn overlay(self, over: JobOptions) -> JobOptions {
        // --gres and --gpus are two spellings of one request: the upper layer's wins whole.
        let over_gpus = over.gres.is_some() || over.gpus.is_some();
        JobOptions {
            job_name: over.job_name.or(self.job_name),
            gres: if over_gpus { over.gres } else { self.gres },
            gpus: if over_gpus { over.gpus } else { self.gpus },
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
            emergency: over.emergency || self.emergency,
            gpu_share: over.gpu_share || self.gpu_share,
            // `--requeue` on the command line undoes a script's `--no-requeue`.
            no_requeue: (over.no_requeue || self.no_requeue) && !over.requeue,
            requeue: over.requeue || self.requeue,
            env: over.env.or(self.env),
            exclusive: over.exclusive.or(self.exclusive),
        }
    }

    /// Checks and types every option.
    pub fn resolve(&self) -> Result<JobRequest, OptionError> {
        let mut warnings = Vec::new();
        let gpus = match (&self.gres, &self.gpus) {
            (Some(_), Some(_)) => return Err(OptionError::GresAndGpus),
            (Some(g), None) => parse_gres(g)?,
            (None, Some(g)) => parse_gpus(g)?,
            (None, None) => GpuRequest::default(),
        };
        if self.gpu_share && gpus.count == 0 {
            return Err(OptionError::GpuShareWithoutGpus);
        }
        if let Some(nodes) = &self.nodes
            && !matches!(nodes.trim(), "1" | "1-1")
        {
            return Err(OptionError::MultiNode(nodes.clone()));
        }
        let cpus_per_task = self.cpus_per_task.unwrap_or(1);
        let ntasks = self.ntasks.unwrap_or(1);
        if cpus_per_task == 0 || ntasks == 0 {
            return Err(OptionError::ZeroCpus);
        }
        if self.mail_type.is_some() || self.mail_user.is_some() {
            warnings.push("--mail-type/--mail-user ignored: labpool sends no mail".to_string());
        }
        if self.qos.is_some() {
            warnings.push("--qos ignored: labpool's limits come from accounts and users (`labpool account list`)".to_string());
        }
        if let Some(d) = &self.dependency {
            parse_dependencies(d)?;
        }
        if let Some(a) = &self.array {
            parse_array(a)?;
        }
        if self.exclusive.is_some() {
            warnings.push(
                "--exclusive ignored: the job holds only the GPUs, cores and memory it asks for"
                    .to_string(),
            );
        }
        if let Some(name) = &self.job_name {
            check_name(name)?;
        }
        Ok(JobRequest {
            name: self.job_name.clone(),
            gpus,
            cpus: cpus_per_task.saturating_mul(ntasks),
            mem_mib: self
                .mem
                .as_deref()
                .map(parse_mem_mib)
                .transpose()?
                .unwrap_or(0),
            time_limit: self.time.as_deref().map(parse_time_limit).transpose()?,
            output: self.output.clone(),
            error: self.error.clone(),
            partition: self.partition.clone(),
            chdir: self.chdir.clone(),
            export: self
                .export
                .as_deref()
                .map(parse_export)
                .transpose()?
                .unwrap_or_default(),
            account: self.account.clone(),
            dependency: self.dependency.clone(),
            array: self.array.clone(),
            datasets: self.datasets.clone(),
            emergency: self.emergency,
            gpu_share: self.gpu_share,
            no_requeue: self.no_requeue && !self.requeue,
            env: self.env.clone(),
            warnings,
        })
    }
}

/// Checks a job name: printable, at most 128 characters, no `/`.
pub fn check_name(name: &str) -> Result<(), OptionError> {
    if name.is_empty() || name.len() > 128 || name.chars().any(|c| c.is_control() || c == '/') {
        return Err(OptionError::BadName(name.to_string()));
    }
    Ok(())
}

/// A job request with every option checked and typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRequest {
    /// Name, if one was given.
    pub name: Option<String>,
    /// GPUs asked for.
    pub gpus: GpuRequest,
    /// CPU cores asked for.
    pub cpus: u32,
    /// Memory asked for, MiB; 0 reserves none.
    pub mem_mib: u64,
    /// Time limit, if one was given.
    pub time_limit: Option<TimeLimit>,
    /// Standard output pattern.
    pub output: Option<String>,
    /// Standard error pattern.
    pub error: Option<String>,
    /// Partition, if one was named.
    pub partition: Option<String>,
    /// Working directory, if one was named.
    pub chdir: Option<String>,
    /// Environment policy.
    pub export: ExportPolicy,
    /// Account, if named.
    pub account: Option<String>,
    /// Dependencies, as written (checked).
    pub dependency: Option<String>,
    /// Array spec, as written (checked).
    pub array: Option<String>,
    /// Datasets read.
    pub datasets: Vec<String>,
    /// Through the emergency lane.
    pub emergency: bool,
    /// The software environment, by name.
    pub env: Option<String>,
    /// Share each GPU with other sharing jobs (`--gpu-share`); only with GPUs.
    pub gpu_share: bool,
    /// End NODE_FAIL instead of being requeued when its node fails (`--no-requeue`).
    pub no_requeue: bool,
    /// Things accepted but worth telling the user.
    pub warnings: Vec<String>,
}

/// Why a submit option was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// Bad GPU request.
    #[error(transparent)]
    Gpu(#[from] GpuParseError),
    /// Bad time limit.
    #[error(transparent)]
    Time(#[from] TimeParseError),
    /// Bad memory size.
    #[error(transparent)]
    Size(#[from] UnitError),
    /// Bad --export.
    #[error(transparent)]
    Export(#[from] ExportParseError),
    /// Bad --dependency.
    #[error(transparent)]
    Dependency(#[from] crate::dependency::DependencyParseError),
    /// Bad --array.
    #[error(transparent)]
    Array(#[from] crate::array::ArrayParseError),
    /// Both spellings of a GPU request.
    #[error("--gres and --gpus both given: use one of them (e.g. --gpus 2)")]
    GresAndGpus,
    /// Zero CPUs.
    #[error("--cpus-per-task and --ntasks must be at least 1")]
    ZeroCpus,
    /// More than one node.
    #[error(
        "--nodes {0}: labpool runs each job on one node; ask for more GPUs on that node instead (e.g. --gpus 4)"
    )]
    MultiNode(String),
    /// `--gpu-share` on a job that asks for no GPU.
    #[error("--gpu-share shares GPUs, but the job asks for none: add --gpus 1 (or --gres=gpu:1)")]
    GpuShareWithoutGpus,
    /// An unusable job name.
    #[error("invalid job name {0:?}: use 1 to 128 printable characters without '/'")]
    BadName(String),
}

/// The values an output file pattern may refer to.
#[derive(Debug, Clone)]
pub struct PatternValues<'a> {
    /// Job id, for `%j`.
    pub job_id: u64,
    /// Job name, for `%x`.
    pub job_name: &'a str,
    /// User name, for `%u`.
    pub user: &'a str,
    /// Node name, for `%N`.
    pub node: &'a str,
    /// The array's id and this task's index, for `%A` and `%a`.
    pub array: Option<(u64, u32)>,
}

/// Expands `%j`, `%x`, `%u`, `%N`, `%A`, `%a` and `%%` in an output file pattern, as Slurm
/// does (outside an array, `%A` is the job id and `%a` Slurm's 4294967294).
///
/// ```
/// use labpool_scheduler::options::{expand_pattern, PatternValues};
/// let v = PatternValues { job_id: 42, job_name: "train", user: "alice", node: "gpu1", array: None };
/// assert_eq!(expand_pattern("logs/%x-%j.out", &v), "logs/train-42.out");
/// ```
pub fn expand_pattern(pattern: &str, v: &PatternValues<'_>) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => out.push_str(&v.job_id.to_string()),
            Some('x') => out.push_str(v.job_name),
            Some('u') => out.push_str(v.user),
            Some('N') => out.push_str(v.node),
            Some('A') => out.push_str(&v.array.map_or(v.job_id, |(a, _)| a).to_string()),
            Some('a') => {
                out.push_str(&v.array.map_or(4_294_967_294, |(_, t)| t as u64).to_string())
            }
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_prefers_upper_layer() {
        let script = JobOptions {
            job_name: Some("s".into()),
            gres: Some("gpu:2".into()),
            mem: Some("1G".into()),
            ..Default::default()
        };
        let cli = JobOptions {
            job_name: Some("c".into()),
            gpus: Some("1".into()),
            ..Default::default()
        };
        let merged = script.overlay(cli);
        assert_eq!(merged.job_name.as_deref(), Some("c"));
        assert_eq!((merged.gres, merged.gpus.as_deref()), (None, Some("1")));
        assert_eq!(merged.mem.as_deref(), Some("1G"));
    }

    #[test]
    fn resolve_defaults_and_errors() {
        let r = JobOptions::default().resolve().unwrap();
        assert_eq!(
            (r.gpus.count, r.cpus, r.mem_mib, r.time_limit),
            (0, 1, 0, None)
        );
        let both = JobOptions {
            gres: Some("gpu:1".into()),
            gpus: Some("1".into()),
            ..Default::default()
        };
        assert_eq!(both.resolve(), Err(OptionError::GresAndGpus));
        let multi = JobOptions {
            nodes: Some("2".into()),
            ..Default::default()
        };
        assert!(matches!(multi.resolve(), Err(OptionError::MultiNode(_))));
        let tasks = JobOptions {
            ntasks: Some(2),
            cpus_per_task: Some(4),
            ..Default::default()
        };
        assert_eq!(tasks.resolve().unwrap().cpus, 8);
        let lenient = JobOptions {
            qos: Some("normal".into()),
            exclusive: Some("node".into()),
            ..Default::default()
        };
        assert_eq!(lenient.resolve().unwrap().warnings.len(), 2);
        let bad_dep = JobOptions {
            dependency: Some("after:3".into()),
            ..Default::default()
        };
        assert!(matches!(bad_dep.resolve(), Err(OptionError::Dependency(_))));
        let bad_array = JobOptions {
            array: Some("5-1".into()),
            ..Default::default()
        };
        assert!(matches!(bad_array.resolve(), Err(OptionError::Array(_))));
        let zero = JobOptions {
            cpus_per_task: Some(0),
            ..Default::default()
        };
        assert_eq!(zero.resolve(), Err(OptionError::ZeroCpus));
    }

    #[test]
    fn gpu_share_needs_gpus_and_layers_like_emergency() {
        let alone = JobOptions {
            gpu_share: true,
            ..Default::default()
        };
        let e = alone.resolve().unwrap_err();
        assert_eq!(e, OptionError::GpuShareWithoutGpus);
        assert!(e.to_string().contains("add --gpus 1"), "{e}");
        let script = JobOptions {
            gpu_share: true,
            ..Default::default()
        };
        let cli = JobOptions {
            gpus: Some("1".into()),
            ..Default::default()
        };
        let r = script.overlay(cli).resolve().unwrap();
        assert!(r.gpu_share);
        assert_eq!(r.gpus.count, 1);
        let plain = JobOptions {
            gres: Some("gpu:1".into()),
            ..Default::default()
        };
        assert!(!plain.resolve().unwrap().gpu_share);
    }

    #[test]
    fn patterns() {
        let v = PatternValues {
            job_id: 7,
            job_name: "n",
            user: "u",
            node: "h",
            array: Some((5, 2)),
        };
        assert_eq!(
            expand_pattern("%j.%x.%u.%N.%%.%q.%A_%a.%", &v),
            "7.n.u.h.%.%q.5_2.%"
        );
    }
}
