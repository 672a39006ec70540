//! Priority: tiers first (emergency, then in credit, then overdrawn), then within a tier a
//! weighted sum of age, fair-share and partition priority, as in Slurm's multifactor plugin.

use crate::policy::PriorityWeights;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A priority tier. Lower runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Spent an emergency token.
    Emergency,
    /// Its user has credit left.
    InCredit,
    /// Its user's credit is spent: runs only where nobody in a higher tier can.
    Overdrawn,
}

impl Tier {
    /// A word for people.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Emergency => "emergency",
            Tier::InCredit => "in-credit",
            Tier::Overdrawn => "overdrawn",
        }
    }
}

/// A job's priority, with the factors behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    /// The tier.
    pub tier: Tier,
    /// Age factor, 0 to 1.
    pub age: f64,
    /// Fair-share factor, 0 to 1 (1: no recent usage).
    pub fairshare: f64,
    /// Partition factor, 0 to 1.
    pub partition: f64,
    /// The weighted sum that orders jobs within the tier.
    pub priority: f64,
    /// The user's credit balance, accrued charges of running jobs taken off.
    pub balance: f64,
    /// It would run beyond its account's share (borrow): within a tier it comes after the jobs
    /// that would not, so that idle GPUs go to returning owners before borrowers.
    #[serde(default)]
    pub borrows: bool,
}

/// Past GPU usage per user, decayed with a half-life: what fair-share is computed from.
#[derive(Debug, Clone, Default)]
pub struct UsageBook {
    /// user → (GPU-seconds as of `at`, `at`).
    users: BTreeMap<String, (f64, Timestamp)>,
}

impl UsageBook {
    /// Adds `gpu_seconds` of use by `user` at `at`.
    pub fn add(&mut self, user: &str, gpu_seconds: f64, at: Timestamp, half_life_s: u64) {
        let entry = self.users.entry(user.to_string()).or_insert((0.0, at));
        let value = decay(entry.0, entry.1, at, half_life_s) + gpu_seconds;
        *entry = (value, at.max(entry.1));
    }

    /// `user`'s usage decayed to `now`.
    pub fn decayed(&self, user: &str, now: Timestamp, half_life_s: u64) -> f64 {
        self.users
            .get(user)
            .map_or(0.0, |(v, at)| decay(*v, *at, now, half_life_s))
    }

    /// Users with any recorded usage.
    pub fn users(&self) -> impl Iterator<Item = &str> {
        self.users.keys().map(String::as_str)
    }
}

fn decay(value: f64, from: Timestamp, to: Timestamp, half_life_s: u64) -> f64 {
    if to <= from || half_life_s == 0 {
        return value;
    }
    let dt = (to.0 - from.0) as f64 / 1000.0;
    value * 0.5f64.powf(dt / half_life_s as f64)
}

/// Slurm's classic fair-share factor with equal shares: `2^(-usage_share / fair_share)`.
/// `usage_share` is the user's part of all decayed usage, `fair_share` is `1 / users`.
pub fn fairshare_factor(user_usage: f64, total_usage: f64, users: usize) -> f64 {
    if total_usage <= 0.0 || users == 0 {
        return 1.0;
    }
    let share = user_usage / total_usage;
    2f64.powf(-share * users as f64)
}

/// The age factor: waiting time over `max_age_s`, capped at 1.
pub fn age_factor(submit: Timestamp, now: Timestamp, max_age_s: u64) -> f64 {
    if max_age_s == 0 {
        return 1.0;
    }
    (now.secs_since(submit) as f64 / max_age_s as f64).min(1.0)
}

/// The weighted sum of the factors.
pub fn weighted(w: &PriorityWeights, age: f64, fairshare: f64, partition: f64) -> f64 {
    w.age * age + w.fairshare * fairshare + w.partition * partition
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_decays_by_half_life() {
        let mut b = UsageBook::default();
        b.add("a", 100.0, Timestamp(0), 10);
        assert_eq!(b.decayed("a", Timestamp(10_000), 10), 50.0);
        b.add("a", 50.0, Timestamp(10_000), 10);
        assert_eq!(b.decayed("a", Timestamp(20_000), 10), 50.0);
        assert_eq!(b.decayed("nobody", Timestamp(0), 10), 0.0);
    }

    #[test]
    fn fairshare_favours_light_users() {
        assert_eq!(fairshare_factor(0.0, 0.0, 3), 1.0);
        assert_eq!(fairshare_factor(0.0, 10.0, 2), 1.0);
        assert_eq!(fairshare_factor(5.0, 10.0, 2), 0.5);
        assert!(fairshare_factor(10.0, 10.0, 2) < fairshare_factor(5.0, 10.0, 2));
        assert_eq!(age_factor(Timestamp(0), Timestamp(3_600_000), 7200), 0.5);
        assert_eq!(age_factor(Timestamp(0), Timestamp(36_000_000), 7200), 1.0);
    }
}
