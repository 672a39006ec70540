//! Partitions (queues): which nodes a job may use, and its default and maximum time.

use crate::time::TimeLimit;
use serde::{Deserialize, Serialize};

/// A partition as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// Name, as in `--partition`.
    pub name: String,
    /// True for the one partition jobs go to when they name none.
    pub default: bool,
    /// Higher runs first.
    pub priority: u32,
    /// Nodes of the partition; `None` means every node.
    pub nodes: Option<Vec<String>>,
    /// Time limit for a job that gives none.
    pub default_time: TimeLimit,
    /// Longest time limit a job may ask for.
    pub max_time: TimeLimit,
    /// Accounts whose jobs may use it; `None` lets everyone in.
    #[serde(default)]
    pub allow_accounts: Option<Vec<String>>,
    /// Most GPUs one job may ask for here (a debug partition is for small jobs).
    #[serde(default)]
    pub max_gpus_per_job: Option<u32>,
    /// Hands out `1/D` of a card to a one-GPU job that names no GPU type and no slice (an
    /// `interactive` or `debug` partition whose jobs rarely need a whole card); `None` gives
    /// whole GPUs. A job that names a type, or asks for more, gets what it asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_slice: Option<u32>,
}

impl Partition {
    /// True when `node` belongs to this partition.
    pub fn has_node(&self, node: &str) -> bool {
        self.nodes
            .as_ref()
            .is_none_or(|ns| ns.iter().any(|n| n == node))
    }
}

/// Why a partition list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionConfigError {
    /// No partitions at all.
    #[error("no partitions are configured: add a [[partition]] with default = true")]
    None,
    /// Not exactly one default.
    #[error("{0} partitions are marked default = true; mark exactly one")]
    Defaults(usize),
    /// A name used twice.
    #[error("partition '{0}' is configured twice")]
    Duplicate(String),
    /// A default time over the maximum.
    #[error("partition '{0}': default_time is longer than max_time")]
    DefaultOverMax(String),
    /// A default slice out of range.
    #[error(
        "partition '{0}': default_slice = {1} is not a slice; give 2 to 16 (4 hands out quarters), as a node's [node] slices cut its cards"
    )]
    DefaultSlice(String, u32),
}

/// Checks a partition list: at least one, exactly one default, unique names.
pub fn check_partitions(parts: &[Partition]) -> Result<(), PartitionConfigError> {
    if parts.is_empty() {
        return Err(PartitionConfigError::None);
    }
    let defaults = parts.iter().filter(|p| p.default).count();
    if defaults != 1 {
        return Err(PartitionConfigError::Defaults(defaults));
    }
    for (i, p) in parts.iter().enumerate() {
        if parts[..i].iter().any(|q| q.name == p.name) {
            return Err(PartitionConfigError::Duplicate(p.name.clone()));
        }
        if let (TimeLimit::Seconds(d), TimeLimit::Seconds(m)) = (p.default_time, p.max_time)
            && d > m
        {
            return Err(PartitionConfigError::DefaultOverMax(p.name.clone()));
        }
        if p.default_time == TimeLimit::Unlimited && p.max_time != TimeLimit::Unlimited {
            return Err(PartitionConfigError::DefaultOverMax(p.name.clone()));
        }
        if let Some(d) = p.default_slice
            && !(2..=crate::slice::MAX_DENOMINATOR).contains(&d)
        {
            return Err(PartitionConfigError::DefaultSlice(p.name.clone(), d));
        }
    }
    Ok(())
}
