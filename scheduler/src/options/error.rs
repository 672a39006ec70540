//! Why a submit option was refused.

use crate::export::ExportParseError;
use crate::gpu::GpuParseError;
use crate::time::TimeParseError;
use labpool_units::UnitError;

/// Why a submit option was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// Bad GPU request.
    #[error(transparent)]
    Gpu(#[from] GpuParseError),
    /// Bad time limit.
    #[error("--time: {0}")]
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
    /// Bad --constraint.
    #[error(transparent)]
    Constraint(#[from] crate::constraint::ConstraintError),
    /// Bad --nodelist or --exclude.
    #[error("{flag}: {error}")]
    Hostlist {
        /// The option.
        flag: &'static str,
        /// What is wrong.
        error: crate::hostlist::HostlistError,
    },
    /// Both spellings of a GPU request.
    #[error("--gres and --gpus both given: use one of them (e.g. --gpus 2)")]
    GresAndGpus,
    /// Zero CPUs.
    #[error("--cpus-per-task and --ntasks must be at least 1")]
    ZeroCpus,
    /// `--gpu-share` on a job that asks for no GPU.
    #[error("--gpu-share shares GPUs, but the job asks for none: add --gpus 1 (or --gres=gpu:1)")]
    GpuShareWithoutGpus,
    /// An unusable job name.
    #[error("invalid job name {0:?}: use 1 to 128 printable characters without '/'")]
    BadName(String),
    /// Two options that set the same thing.
    #[error("{0}")]
    Conflict(String),
    /// A per-GPU option on a job that asks for no GPU.
    #[error("{0} counts per GPU, but the job asks for none: add --gpus N")]
    NeedsGpus(&'static str),
    /// Bad --mail-type.
    #[error("{0}")]
    MailType(String),
    /// An option labpool cannot honour (yet), with the reason.
    #[error("{0}")]
    Unsupported(String),
}

impl OptionError {
    /// True for a problem that another directive line or the command line may settle (the
    /// GPUs that `--gpu-share` or `--cpus-per-gpu` count on may be asked for elsewhere): it is
    /// judged once every layer is in, never on one line alone.
    pub fn needs_other_lines(&self) -> bool {
        matches!(
            self,
            OptionError::GpuShareWithoutGpus | OptionError::NeedsGpus(_)
        )
    }
}
