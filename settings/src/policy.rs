//! `[credits]` and `[priority]`: the scheduling policy's numbers.

use super::values::{de_duration, de_time, ser_duration, ser_time};
use labpool_scheduler::policy::{CreditPolicy, PreemptionPolicy, PriorityWeights};
use labpool_scheduler::time::TimeLimit;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// `[credits]`: the second seed lab's scheme.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CreditsConfig {
    /// Credits every user gets at the start of each month.
    pub monthly_grant: f64,
    /// Credits per GPU-hour by GPU type, e.g. `{ a100 = 2.0, rtx4090 = 1.0 }`.
    pub gpu_weights: BTreeMap<String, f64>,
    /// Credits per GPU-hour of types not listed.
    pub default_weight: f64,
    /// Emergency tokens per user per month.
    pub emergency_tokens: u32,
    /// Most GPUs an emergency job may ask for.
    pub emergency_max_gpus: u32,
    /// Longest time limit of an emergency job (Slurm format).
    #[serde(deserialize_with = "de_time", serialize_with = "ser_time")]
    pub emergency_max_time: TimeLimit,
    /// Share of the normal charge a `--preemptible` job pays (0 to 1).
    pub preemptible_rate: f64,
    /// Share of a charge given back to jobs with GPU utilisation of at least `rebate_min_util`
    /// (needs GPU metrics; 0 switches rebates off).
    pub rebate_fraction: f64,
    /// Utilisation (0 to 1) that earns a rebate.
    pub rebate_min_util: f64,
}

impl Default for CreditsConfig {
    fn default() -> Self {
        let d = CreditPolicy::default();
        CreditsConfig {
            monthly_grant: d.monthly_grant,
            gpu_weights: d.gpu_weights,
            default_weight: d.default_weight,
            emergency_tokens: d.emergency_tokens,
            emergency_max_gpus: d.emergency_max_gpus,
            emergency_max_time: TimeLimit::Seconds(d.emergency_max_time_s),
            preemptible_rate: d.preemptible_rate,
            rebate_fraction: d.rebate_fraction,
            rebate_min_util: d.rebate_min_util,
        }
    }
}

impl CreditsConfig {
    /// Grants and weights are finite and not negative; the rebate shares are 0 to 1.
    pub(super) fn check(&self) -> Result<(), String> {
        if !(self.monthly_grant >= 0.0 && self.monthly_grant.is_finite())
            || self
                .gpu_weights
                .values()
                .chain([&self.default_weight])
                .any(|w| !(*w >= 0.0 && w.is_finite()))
        {
            return Err("[credits]: grants and weights must be numbers of 0 or more".to_string());
        }
        if !(0.0..=1.0).contains(&self.preemptible_rate) {
            return Err(format!(
                "[credits]: preemptible_rate is {}; write a share of the normal charge between 0 and 1 (0.5: half price)",
                self.preemptible_rate
            ));
        }
        if !(0.0..=1.0).contains(&self.rebate_fraction)
            || !(0.0..=1.0).contains(&self.rebate_min_util)
        {
            return Err(
                "[credits]: rebate_fraction and rebate_min_util are between 0 and 1".to_string(),
            );
        }
        Ok(())
    }

    /// The credit scheme as the scheduler takes it.
    pub(super) fn to_policy(&self) -> CreditPolicy {
        CreditPolicy {
            monthly_grant: self.monthly_grant,
            gpu_weights: self.gpu_weights.clone(),
            default_weight: self.default_weight,
            emergency_tokens: self.emergency_tokens,
            emergency_max_gpus: self.emergency_max_gpus,
            emergency_max_time_s: match self.emergency_max_time {
                TimeLimit::Seconds(s) => s,
                TimeLimit::Unlimited => u64::MAX / 2,
            },
            preemptible_rate: self.preemptible_rate,
            rebate_fraction: self.rebate_fraction,
            rebate_min_util: self.rebate_min_util,
        }
    }
}

/// `[preemption]`: how preemptible jobs (`--preemptible`, borrowing beyond an account's
/// share, overdrawn members') give their GPUs back.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PreemptionConfig {
    /// False: nothing is preempted, and accounts do not borrow beyond `GrpTRES`.
    pub enabled: bool,
    /// Between the notice (the job's `--signal`, or TERM, and the notice file) and the stop.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub grace: Duration,
    /// A job is never preempted before it has run this long.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub min_runtime: Duration,
}

impl Default for PreemptionConfig {
    fn default() -> Self {
        let d = PreemptionPolicy::default();
        PreemptionConfig {
            enabled: d.enabled,
            grace: Duration::from_secs(d.grace_s),
            min_runtime: Duration::from_secs(d.min_runtime_s),
        }
    }
}

impl PreemptionConfig {
    /// The preemption policy as the scheduler takes it.
    pub(super) fn to_policy(&self) -> PreemptionPolicy {
        PreemptionPolicy {
            enabled: self.enabled,
            grace_s: self.grace.as_secs(),
            min_runtime_s: self.min_runtime.as_secs(),
        }
    }
}

/// `[priority]`: weights of Slurm-style multifactor priority within a tier.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PriorityConfig {
    /// Weight of time waiting.
    pub weight_age: f64,
    /// Weight of fair-share.
    pub weight_fairshare: f64,
    /// Weight of the partition's priority.
    pub weight_partition: f64,
    /// Waiting time at which the age factor is full.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub max_age: Duration,
    /// Half-life of past usage in fair-share.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub fairshare_half_life: Duration,
}

impl Default for PriorityConfig {
    fn default() -> Self {
        let d = PriorityWeights::default();
        PriorityConfig {
            weight_age: d.age,
            weight_fairshare: d.fairshare,
            weight_partition: d.partition,
            max_age: Duration::from_secs(d.max_age_s),
            fairshare_half_life: Duration::from_secs(d.half_life_s),
        }
    }
}

impl PriorityConfig {
    /// The weights as the scheduler takes them.
    pub(super) fn to_weights(&self) -> PriorityWeights {
        PriorityWeights {
            age: self.weight_age,
            fairshare: self.weight_fairshare,
            partition: self.weight_partition,
            max_age_s: self.max_age.as_secs(),
            half_life_s: self.fairshare_half_life.as_secs(),
        }
    }
}
