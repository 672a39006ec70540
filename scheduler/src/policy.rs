//! The policy the scheduler enforces: per-account and per-user limits (Slurm's QOS names),
//! credits and the emergency lane, and the weights of the priority factors.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// QOS limits, with Slurm's names. `None` means no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `GrpTRES=gres/gpu=N`: GPUs in use by a whole account at once.
    pub grp_gpus: Option<u32>,
    /// `MaxTRESPerUser=gres/gpu=N`: GPUs in use by one user at once.
    pub max_gpus_per_user: Option<u32>,
    /// `MaxWall=HH:MM:SS`: longest time limit a job may have, seconds.
    pub max_wall_s: Option<u64>,
    /// `MaxJobsPerUser=N`: jobs running per user.
    pub max_jobs_per_user: Option<u32>,
    /// `MaxSubmitJobsPerUser=N`: jobs queued or running per user; enforced at submit.
    pub max_submit_jobs_per_user: Option<u32>,
    /// `BorrowLimit=gres/gpu=N` (labpool's): GPUs an account may use beyond its `GrpTRES`
    /// share while they are idle, preemptible while it does. `None` borrows nothing, so that
    /// `GrpTRES` stays a hard cap until an admin opens it.
    #[serde(default)]
    pub borrow_gpus: Option<u32>,
    /// `LendLimit=gres/gpu=N` (labpool's): of its unused `GrpTRES` share, how many GPUs an
    /// account lends to borrowers; the rest is kept free for it. `None` lends all of it.
    #[serde(default)]
    pub lend_gpus: Option<u32>,
}

/// Why a QOS setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitParseError {
    /// Not KEY=VALUE.
    #[error("'{0}' is not KEY=VALUE; keys: {KEYS}")]
    Shape(String),
    /// An unknown key.
    #[error("unknown QOS key '{0}'; keys: {KEYS}")]
    Key(String),
    /// A bad value.
    #[error("bad value for {key}: '{value}' ({why})")]
    Value {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What was expected.
        why: &'static str,
    },
}

const KEYS: &str = "GrpTRES=gres/gpu=N, MaxTRESPerUser=gres/gpu=N, MaxWall=HH:MM:SS, MaxJobsPerUser=N, MaxSubmitJobsPerUser=N, BorrowLimit=gres/gpu=N, LendLimit=gres/gpu=N (a value of -1 removes the limit)";

impl Limits {
    /// Applies `KEY=VALUE` settings in Slurm's spelling; `-1` (or `none`) clears a limit.
    ///
    /// ```
    /// use labpool_scheduler::policy::Limits;
    /// let mut l = Limits::default();
    /// l.apply(&["GrpTRES=gres/gpu=8", "MaxWall=72:00:00"]).unwrap();
    /// assert_eq!((l.grp_gpus, l.max_wall_s), (Some(8), Some(72 * 3600)));
    /// ```
    pub fn apply<S: AsRef<str>>(&mut self, settings: &[S]) -> Result<(), LimitParseError> {
        let mut next = self.clone();
        for s in settings {
            let s = s.as_ref();
            let (key, value) = s
                .split_once('=')
                .ok_or_else(|| LimitParseError::Shape(s.to_string()))?;
            let clear = value == "-1" || value.eq_ignore_ascii_case("none");
            let bad = |why| LimitParseError::Value {
                key: key.to_string(),
                value: value.to_string(),
                why,
            };
            let count = |v: &str| v.parse::<u32>().map_err(|_| bad("a whole number"));
            let gpus = |v: &str| {
                let n = v
                    .strip_prefix("gres/gpu=")
                    .ok_or_else(|| bad("write gres/gpu=N; labpool limits GPUs only"))?;
                n.parse::<u32>().map_err(|_| bad("write gres/gpu=N"))
            };
            match key.to_ascii_lowercase().as_str() {
                "grptres" => next.grp_gpus = if clear { None } else { Some(gpus(value)?) },
                "maxtresperuser" => {
                    next.max_gpus_per_user = if clear { None } else { Some(gpus(value)?) }
                }
                "maxwall" => {
                    next.max_wall_s = if clear {
                        None
                    } else {
                        match crate::time::parse_time_limit(value) {
                            Ok(crate::time::TimeLimit::Seconds(s)) => Some(s),
                            _ => return Err(bad("a time such as 72:00:00 or 3-00:00:00")),
                        }
                    }
                }
                "maxjobsperuser" => {
                    next.max_jobs_per_user = if clear { None } else { Some(count(value)?) }
                }
                "maxsubmitjobsperuser" => {
                    next.max_submit_jobs_per_user = if clear { None } else { Some(count(value)?) }
                }
                "borrowlimit" => next.borrow_gpus = if clear { None } else { Some(gpus(value)?) },
                "lendlimit" => next.lend_gpus = if clear { None } else { Some(gpus(value)?) },
                _ => return Err(LimitParseError::Key(key.to_string())),
            }
        }
        *self = next;
        Ok(())
    }

    /// The tighter of two limit sets, key by key.
    pub fn tightest(&self, other: &Limits) -> Limits {
        fn min<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            }
        }
        Limits {
            grp_gpus: min(self.grp_gpus, other.grp_gpus),
            max_gpus_per_user: min(self.max_gpus_per_user, other.max_gpus_per_user),
            max_wall_s: min(self.max_wall_s, other.max_wall_s),
            max_jobs_per_user: min(self.max_jobs_per_user, other.max_jobs_per_user),
            max_submit_jobs_per_user: min(
                self.max_submit_jobs_per_user,
                other.max_submit_jobs_per_user,
            ),
            borrow_gpus: min(self.borrow_gpus, other.borrow_gpus),
            lend_gpus: min(self.lend_gpus, other.lend_gpus),
        }
    }

    /// The limits in Slurm's `KEY=VALUE` spelling, for listings.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(n) = self.grp_gpus {
            out.push(format!("GrpTRES=gres/gpu={n}"));
        }
        if let Some(n) = self.max_gpus_per_user {
            out.push(format!("MaxTRESPerUser=gres/gpu={n}"));
        }
        if let Some(s) = self.max_wall_s {
            out.push(format!("MaxWall={}", labpool_units::format_elapsed(s)));
        }
        if let Some(n) = self.max_jobs_per_user {
            out.push(format!("MaxJobsPerUser={n}"));
        }
        if let Some(n) = self.max_submit_jobs_per_user {
            out.push(format!("MaxSubmitJobsPerUser={n}"));
        }
        if let Some(n) = self.borrow_gpus {
            out.push(format!("BorrowLimit=gres/gpu={n}"));
        }
        if let Some(n) = self.lend_gpus {
            out.push(format!("LendLimit=gres/gpu={n}"));
        }
        out
    }
}

/// A research group: its members and its limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// Member user names.
    pub members: BTreeSet<String>,
    /// Limits on the account (`GrpTRES`) and on each member (the per-user keys).
    pub limits: Limits,
}

/// Credits, as the second seed lab ran them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditPolicy {
    /// Credits every user gets at the start of each month.
    pub monthly_grant: f64,
    /// Credits per GPU-hour, by GPU type; types not listed cost `default_weight`.
    pub gpu_weights: BTreeMap<String, f64>,
    /// Credits per GPU-hour for unlisted types.
    pub default_weight: f64,
    /// Emergency tokens per user per month.
    pub emergency_tokens: u32,
    /// Most GPUs an emergency job may ask for.
    pub emergency_max_gpus: u32,
    /// Longest time limit an emergency job may have, seconds.
    pub emergency_max_time_s: u64,
    /// Share of the normal charge a `--preemptible` job pays (0.5: half price), for accepting
    /// that it may be stopped and requeued at any time after its minimum runtime.
    #[serde(default = "default_preemptible_rate")]
    pub preemptible_rate: f64,
    /// Share of a job's charge given back when its GPU utilisation was at least
    /// `rebate_min_util` (0 switches rebates off). Fed by GPU metrics once they exist.
    pub rebate_fraction: f64,
    /// Utilisation (0 to 1) a job needs for a rebate.
    pub rebate_min_util: f64,
}

impl Default for CreditPolicy {
    fn default() -> Self {
        CreditPolicy {
            monthly_grant: 1000.0,
            gpu_weights: BTreeMap::new(),
            default_weight: 1.0,
            emergency_tokens: 2,
            emergency_max_gpus: 2,
            emergency_max_time_s: 24 * 3600,
            preemptible_rate: default_preemptible_rate(),
            rebate_fraction: 0.0,
            rebate_min_util: 0.8,
        }
    }
}

fn default_preemptible_rate() -> f64 {
    0.5
}

impl CreditPolicy {
    /// Credits per GPU-hour on GPUs of `gpu_type`.
    pub fn weight(&self, gpu_type: &str) -> f64 {
        self.gpu_weights
            .get(gpu_type)
            .copied()
            .unwrap_or(self.default_weight)
    }

    /// What a job costs: GPU-hours on its allocated time times the type's weight.
    pub fn charge(&self, gpus: u32, gpu_type: &str, seconds: u64) -> f64 {
        gpus as f64 * seconds as f64 / 3600.0 * self.weight(gpu_type)
    }

    /// The rebate hook: credits given back for an efficient job. `gpu_util` is the job's mean
    /// GPU utilisation (0 to 1), `None` until GPU metrics are collected, which gives nothing.
    pub fn rebate(&self, charge: f64, gpu_util: Option<f64>) -> f64 {
        match gpu_util {
            Some(u) if self.rebate_fraction > 0.0 && u >= self.rebate_min_util => {
                charge * self.rebate_fraction
            }
            _ => 0.0,
        }
    }
}

/// Weights of the priority factors within a tier, and the fair-share half-life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityWeights {
    /// Weight of age (time waiting, capped at `max_age_s`).
    pub age: f64,
    /// Weight of fair-share (high for users who used little lately).
    pub fairshare: f64,
    /// Weight of the partition's priority.
    pub partition: f64,
    /// Age at which the age factor reaches 1.
    pub max_age_s: u64,
    /// Half-life of past usage in fair-share, seconds.
    pub half_life_s: u64,
}

impl Default for PriorityWeights {
    fn default() -> Self {
        PriorityWeights {
            age: 1000.0,
            fairshare: 10_000.0,
            partition: 5000.0,
            max_age_s: 7 * 86_400,
            half_life_s: 7 * 86_400,
        }
    }
}

/// How the scheduler places jobs: which scorers run, how far backfill looks ahead, and
/// whether it stages data ahead of predicted starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementPolicy {
    /// Prefer nodes that already hold the job's datasets.
    pub locality: bool,
    /// Prefer the node left fullest (bin-packing); off means first fit in node order.
    pub binpack: bool,
    /// Most blocked jobs that get a reservation per pass (conservative backfill for these).
    pub max_reservations: usize,
    /// Ask for datasets to be staged on the reserved node of jobs predicted to start within
    /// this many seconds; `None` stages only when a job is placed.
    pub prefetch_horizon_s: Option<u64>,
    /// Seed for the order nodes are tried in, for ties; `None` keeps name order.
    pub node_order_seed: Option<u64>,
    /// Longest a job that could start now on a node without its data waits instead for a node
    /// that holds it (delay scheduling), in seconds, when that wait plus what is left to copy
    /// there is shorter than the copy here; `None` never waits.
    #[serde(default)]
    pub locality_wait_s: Option<u64>,
    /// Longest a job that fits now on a node without its data is kept waiting, its GPUs not
    /// taken, while its data is copied there (a stage-in, as Slurm's burst buffers do), in
    /// seconds; past it the job takes its GPUs and waits for the rest on them. `None` takes
    /// the GPUs at once and stages on them.
    #[serde(default)]
    pub stage_in_wait_s: Option<u64>,
    /// The TCP ports leased to jobs (`MASTER_PORT` and the rest of a job's block), first and
    /// last; keep other services out of this range.
    #[serde(default = "default_ports")]
    pub ports: (u16, u16),
}

/// The ports leased to jobs unless configured: below Linux's default ephemeral range
/// (32768-60999), so the kernel never picks one of them as a client's source port.
pub fn default_ports() -> (u16, u16) {
    (20000, 29999)
}

impl Default for PlacementPolicy {
    fn default() -> Self {
        PlacementPolicy {
            locality: true,
            binpack: true,
            max_reservations: 100,
            prefetch_horizon_s: Some(1800),
            node_order_seed: None,
            locality_wait_s: Some(1800),
            stage_in_wait_s: Some(7 * 86400),
            ports: default_ports(),
        }
    }
}

/// Everything the scheduler enforces besides partitions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Policy {
    /// Credits and the emergency lane.
    pub credits: CreditPolicy,
    /// Priority weights.
    pub weights: PriorityWeights,
    /// Placement.
    pub placement: PlacementPolicy,
    /// Preemption: notice, grace and minimum runtime.
    #[serde(default)]
    pub preemption: PreemptionPolicy,
}

/// How preemptible jobs are stopped to give their GPUs back (see [`crate::preempt`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptionPolicy {
    /// False: nothing is ever preempted (borrowing is then refused too, as it could never
    /// be taken back).
    pub enabled: bool,
    /// Seconds between the notice and the stop (TERM, then KILL after the kill grace).
    pub grace_s: u64,
    /// A job is never preempted before it has run this long, in seconds.
    pub min_runtime_s: u64,
}

impl Default for PreemptionPolicy {
    fn default() -> Self {
        PreemptionPolicy {
            enabled: true,
            grace_s: 120,
            min_runtime_s: 600,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_and_clear() {
        let mut l = Limits::default();
        l.apply(&[
            "MaxTRESPerUser=gres/gpu=2",
            "MaxJobsPerUser=3",
            "MaxSubmitJobsPerUser=10",
        ])
        .unwrap();
        assert_eq!(
            l.describe(),
            [
                "MaxTRESPerUser=gres/gpu=2",
                "MaxJobsPerUser=3",
                "MaxSubmitJobsPerUser=10"
            ]
        );
        l.apply(&["MaxJobsPerUser=-1"]).unwrap();
        assert_eq!(l.max_jobs_per_user, None);
        let before = l.clone();
        assert!(matches!(
            l.apply(&["MaxJobs=2"]),
            Err(LimitParseError::Key(_))
        ));
        assert!(matches!(
            l.apply(&["GrpTRES=cpu=4"]),
            Err(LimitParseError::Value { .. })
        ));
        assert!(matches!(
            l.apply(&["MaxWall"]),
            Err(LimitParseError::Shape(_))
        ));
        assert_eq!(l, before, "a refused setting changes nothing");
        let t = Limits {
            max_gpus_per_user: Some(4),
            ..Default::default()
        }
        .tightest(&Limits {
            max_gpus_per_user: Some(2),
            max_wall_s: Some(60),
            ..Default::default()
        });
        assert_eq!((t.max_gpus_per_user, t.max_wall_s), (Some(2), Some(60)));
    }

    #[test]
    fn charges_and_rebates() {
        let mut c = CreditPolicy::default();
        c.gpu_weights.insert("a100".into(), 2.0);
        assert_eq!(c.charge(2, "a100", 1800), 2.0);
        assert_eq!(c.charge(1, "t4", 3600), 1.0);
        assert_eq!(c.rebate(10.0, Some(0.9)), 0.0, "rebates are off by default");
        c.rebate_fraction = 0.1;
        assert_eq!(c.rebate(10.0, Some(0.9)), 1.0);
        assert_eq!(c.rebate(10.0, Some(0.5)), 0.0);
        assert_eq!(c.rebate(10.0, None), 0.0);
    }
}
