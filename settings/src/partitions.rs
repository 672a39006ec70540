//! `[[partition]]`: the queues, and the four that apply when the file names none.

use super::values::{de_time, ser_time};
use labpool_scheduler::partition::Partition;
use labpool_scheduler::time::TimeLimit;
use serde::{Deserialize, Serialize};

/// `[[partition]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionConfig {
    /// Name.
    pub name: String,
    /// Jobs that name no partition go to the default one.
    #[serde(default)]
    pub default: bool,
    /// Higher is scheduled first.
    #[serde(default)]
    pub priority: u32,
    /// Node names [default: every node].
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// Time limit of a job that gives none (Slurm format).
    #[serde(deserialize_with = "de_time", serialize_with = "ser_time")]
    pub default_time: TimeLimit,
    /// Longest time limit a job may ask for (Slurm format, or UNLIMITED).
    #[serde(deserialize_with = "de_time", serialize_with = "ser_time")]
    pub max_time: TimeLimit,
    /// Accounts whose jobs may use it [default: everyone].
    #[serde(default)]
    pub allow_accounts: Option<Vec<String>>,
    /// Most GPUs one job may ask for here.
    #[serde(default)]
    pub max_gpus_per_job: Option<u32>,
    /// A one-GPU job that names no GPU type and no slice gets `1/D` of a card here (D from 2 to
    /// 16, a slice some node's cards are cut into) [default: whole GPUs].
    #[serde(default)]
    pub default_slice: Option<u32>,
    /// A session here with no input, whose GPUs stay under `idle_gpu_percent`, for this long is
    /// told, then stopped [default: `[jobs] interactive_idle`].
    #[serde(
        default,
        deserialize_with = "super::values::de_some_duration",
        serialize_with = "super::values::ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle_after: Option<std::time::Duration>,
    /// A session's GPU at or over this utilisation, percent, is computing [default:
    /// `[jobs] idle_gpu_percent`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_gpu_percent: Option<f64>,
    /// How long a session told it is idle has before it is stopped [default: `[jobs] idle_grace`].
    #[serde(
        default,
        deserialize_with = "super::values::de_some_duration",
        serialize_with = "super::values::ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle_grace: Option<std::time::Duration>,
}

/// Why an idle rule's values cannot be used: a percent outside 0 to 100, a grace under 1 s.
pub(super) fn check_idle(
    section: &str,
    percent: Option<f64>,
    grace: Option<std::time::Duration>,
) -> Result<(), String> {
    if let Some(p) = percent
        && !(0.0..=100.0).contains(&p)
    {
        return Err(format!(
            "{section} idle_gpu_percent = {p}: give a utilisation from 0 to 100 (5 by default)"
        ));
    }
    if let Some(g) = grace
        && g < std::time::Duration::from_secs(1)
    {
        return Err(format!(
            "{section} idle_grace = {g:?}: give at least 1s (\"10m\" by default)"
        ));
    }
    Ok(())
}

impl PartitionConfig {
    /// The partition as the scheduler takes it.
    pub(super) fn to_scheduler(&self) -> Partition {
        Partition {
            name: self.name.clone(),
            default: self.default,
            priority: self.priority,
            nodes: self.nodes.clone(),
            default_time: self.default_time,
            max_time: self.max_time,
            allow_accounts: self.allow_accounts.clone(),
            max_gpus_per_job: self.max_gpus_per_job,
            default_slice: self.default_slice,
        }
    }
}

/// The partitions of a file that has no `[[partition]]`.
pub(super) fn default_partitions() -> Vec<PartitionConfig> {
    let part = |name: &str, default, priority, default_time, max_time| PartitionConfig {
        name: name.into(),
        default,
        priority,
        nodes: None,
        default_time: TimeLimit::Seconds(default_time),
        max_time: TimeLimit::Seconds(max_time),
        allow_accounts: None,
        max_gpus_per_job: None,
        default_slice: None,
        idle_after: None,
        idle_gpu_percent: None,
        idle_grace: None,
    };
    vec![
        // Deadline work: an admin grants it by adding people to the `deadline` account.
        PartitionConfig {
            allow_accounts: Some(vec!["deadline".into()]),
            ..part("high", false, 100, 86_400, 3 * 86_400)
        },
        part("normal", true, 10, 86_400, 7 * 86_400),
        // Short and small: for trying code.
        PartitionConfig {
            max_gpus_per_job: Some(1),
            default_slice: None,
            ..part("debug", false, 50, 1800, 3600)
        },
        part("interactive", false, 30, 3600, 4 * 3600),
    ]
}
