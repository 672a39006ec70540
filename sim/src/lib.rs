//! The trace simulator: replays a job trace through the same scheduler and the same lifecycle
//! core the controller runs (`labpool_scheduler::Scheduler`, `labpool_lifecycle::Lifecycle`),
//! with a simulated clock and a model of dataset staging, so that a season of a lab's jobs
//! replays in seconds and every run is reproducible from its seed.
//!
//! Staging model: each node has an SSD cache of datasets. A placed job holds its GPUs while
//! the datasets it reads are copied from shared storage; the shared storage's bandwidth is split
//! evenly among the transfers in flight, and a node's SSD bandwidth among that node's. A dataset
//! already complete on the node costs nothing. Cached datasets are evicted to make room: by
//! least recent use, or (with prefetch) the one whose next use in the queue is furthest away
//! (data no queued job reads by least recent use, then size). Datasets in use or in transfer
//! are pinned. A prefetch uses free space only; it never evicts.
//!
//! All three policies order the queue the same way (first come, first served, with backfill by
//! time limits), so that the comparison isolates how data is handled:
//! - `fifo`: first-fit placement, LRU cache, staging only once a job is placed;
//! - `locality`: the dataset-locality scorer (then bin-packing), staging when placed;
//! - `locality+prefetch`: also stages ahead onto the node reserved for a job expected to start
//!   within the horizon, evicting by furthest next use, with pins.

//! - `labpool`: exactly the placement, priority and prefetch policy `labpool serve` runs with
//!   the same config (given as [`SimInput::daemon`]), and the daemon's eviction
//!   (`labpool_cache::evict::order`, the node cache's own code: furthest next use, then least
//!   recent use, then size; pins). Credits are reported, not enforced, as in the baselines: the simulator does
//!   not model the monthly grant's reset.
#![deny(missing_docs)]

pub mod accounts;
pub mod bound;
pub mod config;
pub mod generate;
mod links;
mod preemption;
pub mod report;
mod run;
pub mod sweep;
pub mod trace;
mod world;

pub use run::simulate;

use config::ClusterSpec;
use labpool_scheduler::policy::{
    Account, CreditPolicy, PlacementPolicy, Policy, PreemptionPolicy, PriorityWeights,
};
use std::collections::BTreeMap;
use trace::TraceJob;

/// A data-handling policy to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SimPolicy {
    /// First fit, LRU cache, staging at placement.
    Fifo,
    /// Locality scorer, staging at placement.
    Locality,
    /// Locality scorer, prefetch within the horizon, furthest-next-use eviction, pins.
    LocalityPrefetch,
    /// What `labpool serve` does with the same config: its placement policy and prefetch
    /// horizon, the daemon's eviction.
    Labpool,
}

impl SimPolicy {
    /// Every policy, in the order they are reported.
    pub const ALL: [SimPolicy; 4] = [
        SimPolicy::Fifo,
        SimPolicy::Locality,
        SimPolicy::LocalityPrefetch,
        SimPolicy::Labpool,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SimPolicy::Fifo => "fifo",
            SimPolicy::Locality => "locality",
            SimPolicy::LocalityPrefetch => "locality+prefetch",
            SimPolicy::Labpool => "labpool",
        }
    }

    /// Parses a name.
    pub fn parse(name: &str) -> Option<SimPolicy> {
        SimPolicy::ALL.into_iter().find(|p| p.name() == name.trim())
    }

    /// Stages ahead and evicts by furthest next use (the daemon's cache does both).
    pub(crate) fn stages_ahead(self) -> bool {
        matches!(self, SimPolicy::LocalityPrefetch | SimPolicy::Labpool)
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct SimInput {
    /// The trace.
    pub jobs: Vec<TraceJob>,
    /// Dataset sizes, bytes.
    pub datasets: BTreeMap<String, u64>,
    /// The cluster.
    pub cluster: ClusterSpec,
    /// How far ahead prefetch looks, seconds.
    pub horizon_s: u64,
    /// Seed for tie-breaking node order (the baselines; `labpool` keeps the daemon's order).
    pub seed: u64,
    /// The policy `labpool serve` runs with the config at hand, for [`SimPolicy::Labpool`].
    pub daemon: Policy,
    /// Accounts (research groups) with their members and limits; empty runs every job
    /// without one. A user's jobs run under the first account that lists them.
    pub accounts: BTreeMap<String, Account>,
}

/// Why a run could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A job reads a dataset with no size.
    #[error("trace job {job} reads dataset '{dataset}', which the datasets file does not list")]
    UnknownDataset {
        /// Trace job id.
        job: u64,
        /// The dataset.
        dataset: String,
    },
}

/// GPU-hour weights for the credit figures: newer GPUs cost more.
pub fn sim_credit_weights() -> BTreeMap<String, f64> {
    [("v100", 1.0), ("p100", 0.5), ("k80", 0.25)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn scheduler_policy(input: &SimInput, policy: SimPolicy) -> Policy {
    let (seed, horizon_s) = (input.seed, input.horizon_s);
    if policy == SimPolicy::Labpool {
        let mut daemon = input.daemon.clone();
        daemon.credits.monthly_grant = f64::INFINITY;
        return daemon;
    }
    Policy {
        // Credits are reported, not enforced: all three policies order the queue alike.
        credits: CreditPolicy {
            monthly_grant: f64::INFINITY,
            gpu_weights: sim_credit_weights(),
            ..CreditPolicy::default()
        },
        weights: PriorityWeights {
            age: 1.0,
            fairshare: 0.0,
            partition: 0.0,
            max_age_s: 100 * 365 * 86_400,
            half_life_s: 7 * 86_400,
        },
        placement: PlacementPolicy {
            locality: policy != SimPolicy::Fifo,
            binpack: policy != SimPolicy::Fifo,
            max_reservations: 64,
            prefetch_horizon_s: policy.stages_ahead().then_some(horizon_s),
            node_order_seed: Some(seed),
            locality_wait_s: None,
            stage_in_wait_s: None,
            ..PlacementPolicy::default()
        },
        preemption: PreemptionPolicy::default(),
    }
}
