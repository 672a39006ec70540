//! A job request with every option checked and typed.

use crate::export::ExportPolicy;
use crate::gpu::GpuRequest;
use crate::options::OptionError;
use crate::options::slurm::SignalSpec;
use crate::time::TimeLimit;

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
    /// Tasks in all (`--ntasks`, or from `--ntasks-per-node` or `--ntasks-per-gpu`); 1 by
    /// default.
    pub ntasks: u32,
    /// Nodes; GPUs, cores and memory above are each node's.
    pub node_count: u32,
    /// `--gpus-per-task`'s count: `srun` gives each task that many GPUs of its own.
    pub gpus_per_task: Option<u32>,
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
    /// Models read (`org/name`), checked by the controller.
    pub models: Vec<String>,
    /// Through the emergency lane.
    pub emergency: bool,
    /// May be preempted (`--preemptible`).
    pub preemptible: bool,
    /// The reservation to run in (`--reservation`), checked by the controller.
    pub reservation: Option<String>,
    /// The software environment, by name.
    pub env: Option<String>,
    /// Share each GPU with other sharing jobs (`--gpu-share`); only with GPUs.
    pub gpu_share: bool,
    /// End NODE_FAIL instead of being requeued when its node fails (`--no-requeue`).
    pub no_requeue: bool,
    /// A signal to send before the time limit (`--signal`).
    pub signal: Option<SignalSpec>,
    /// Append to the output files instead of truncating them (`--open-mode=append`).
    pub open_append: bool,
    /// Load the user's login environment under the submitted one (`--get-user-env`), giving
    /// the login shell this many seconds.
    pub get_user_env: Option<u32>,
    /// A note kept with the job (`--comment`).
    pub comment: Option<String>,
    /// The moments its member is told about (`--mail-type`).
    pub mail_types: std::collections::BTreeSet<crate::options::MailType>,
    /// Who is told (`--mail-user`): an address or a login name [default: the member].
    pub mail_user: Option<String>,
    /// Submitted held (`--hold`).
    pub hold: bool,
    /// Not to start before this time (`--begin`), as written: the client reads it in its own
    /// time zone.
    pub begin: Option<String>,
    /// Which nodes it may run on.
    pub nodes: crate::job::NodeRequest,
    /// Things accepted but worth telling the user.
    pub warnings: Vec<String>,
}
