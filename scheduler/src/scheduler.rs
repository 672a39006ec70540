//! The scheduler: a synchronous state machine. Events come in as method calls (a job submitted,
//! a job ended, a node joined or went down, an account changed); [`Scheduler::schedule`] turns
//! the state into decisions (start job J on node N with GPUs [..], keep it waiting for reason R,
//! stage dataset D on node N ahead of a predicted start). The pass itself is in [`crate::pass`].
//!
//! It reads no clock and does no I/O; every map it iterates is ordered, so the same calls give
//! the same decisions. The controller drives it with the wall clock and the simulator with a
//! simulated one.
//!
//! This file holds the types, the constructors and the pool's books (nodes, accounts, limits,
//! balances, usage) with their queries; `admit` decides what may enter the queue, `jobs` keeps
//! the books as jobs are queued, restored, finished and requeued, `settle` says what an attempt
//! owes when it lets go of its GPUs, and `invariants` checks them.

use crate::job::{Allocation, JobId, JobSpec};
use crate::node::{Node, NodeSpec};
use crate::partition::{Partition, PartitionConfigError, check_partitions};
use crate::placement::Chain;
use crate::policy::{Account, Limits, Policy};
use crate::priority::{Factors, UsageBook};
use crate::reason::PendingReason;
use crate::runtime::RuntimeBook;
use crate::time::Timestamp;
use std::collections::BTreeMap;

mod admit;
mod fractions;
mod invariants;
mod reconfigure;
pub use reconfigure::ReconfigureError;
mod jobs;
mod settle;
pub mod suspend;
mod test_only;

pub use settle::Settlement;
pub use test_only::Prediction;

/// What the scheduler decided for one job in a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start the job with this allocation. The scheduler already counts it as running.
    Start {
        /// The job.
        job: JobId,
        /// Where, and what it holds.
        allocation: Allocation,
        /// Declared datasets not yet cached on that node: the job holds its GPUs while they
        /// are staged.
        stage: Vec<String>,
    },
    /// The job keeps waiting; emitted only when its reason changed.
    Wait {
        /// The job.
        job: JobId,
        /// Why.
        reason: PendingReason,
    },
    /// The waiting job can no longer end before its `--deadline`: it has left the queue and
    /// ends DEADLINE. The scheduler no longer counts it.
    Expire {
        /// The job.
        job: JobId,
    },
    /// Tell a running job to stop, and requeue it, so that a waiting job gets its GPUs: it gets
    /// its notice now and is stopped when the grace period ends. The scheduler counts its GPUs
    /// free from then on.
    Preempt {
        /// The job to stop.
        job: JobId,
        /// The waiting job that takes its GPUs.
        by: JobId,
        /// Why it may be preempted, in words.
        cause: String,
    },
    /// Stage a dataset on the node a waiting job is expected to start on, so that it finds its
    /// data there. Emitted every pass while it applies; the consumer ignores repeats.
    Prefetch {
        /// The job.
        job: JobId,
        /// Where it is expected to run.
        node: String,
        /// The dataset.
        dataset: String,
        /// When it is expected to start.
        expected_start: Timestamp,
    },
    /// Copy the waiting job's datasets to the node it starts on next, before it takes its
    /// GPUs there (a stage-in): it waits for this copy, so the copy goes before prefetches.
    /// Repeated every pass the job is held for it.
    StageIn {
        /// The job.
        job: JobId,
        /// The node it will start on.
        node: String,
        /// The datasets that node lacks.
        datasets: Vec<String>,
    },
}

/// A running job that could not be restored, e.g. after a config change removed its GPUs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot restore running job {job} on {node}: {problem}")]
pub struct RestoreError {
    /// The job.
    pub job: JobId,
    /// Its node.
    pub node: String,
    /// What is wrong.
    pub problem: String,
}

/// A node the scheduler cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node} has {gpus} GPUs; labpool handles at most 64 per node")]
pub struct NodeError {
    /// The node.
    pub node: String,
    /// Its GPU count.
    pub gpus: usize,
}

/// Where a waiting job stood in the last pass, for `labpool why`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobNote {
    /// Its priority and the factors behind it.
    pub factors: Factors,
    /// Its place in the pass's order, from 1.
    pub position: usize,
    /// The stage that stopped it: dependency, limits, or placement.
    pub stage: String,
    /// The reason it waits.
    pub reason: PendingReason,
    /// Per-stage rejection counts, when placement stopped it.
    pub rejections: Option<crate::placement::Rejections>,
    /// The node and time reserved for it, when it has a reservation.
    pub reservation: Option<(String, Timestamp)>,
    /// The running jobs told to stop so that it can start, with why each could be.
    #[serde(default)]
    pub preempting: Vec<(JobId, String)>,
    /// Since when it has waited for a node that holds its data (delay scheduling).
    #[serde(default)]
    pub delayed_since: Option<Timestamp>,
    /// The node its data is being copied to while it waits without GPUs (a stage-in), and
    /// since when.
    #[serde(default)]
    pub staging_in: Option<(String, Timestamp)>,
}

/// The scheduling state of a pool.
pub struct Scheduler {
    pub(crate) partitions: Vec<Partition>,
    pub(crate) policy: Policy,
    pub(crate) chain: Chain,
    pub(crate) nodes: BTreeMap<String, Node>,
    /// The order nodes are tried in: by name, or a seeded permutation.
    pub(crate) node_order: Vec<String>,
    pub(crate) pending: BTreeMap<JobId, JobSpec>,
    pub(crate) running: BTreeMap<JobId, (JobSpec, Allocation)>,
    pub(crate) reasons: BTreeMap<JobId, PendingReason>,
    pub(crate) notes: BTreeMap<JobId, JobNote>,
    pub(crate) accounts: BTreeMap<String, Account>,
    pub(crate) user_limits: BTreeMap<String, Limits>,
    pub(crate) balances: BTreeMap<String, f64>,
    pub(crate) usage: UsageBook,
    pub(crate) runtimes: RuntimeBook,
    /// How jobs that dependencies point at ended: true for COMPLETED.
    pub(crate) outcomes: BTreeMap<JobId, bool>,
    pub(crate) last_pass: Option<Timestamp>,
    /// What the last pass booked, for a pass after jobs were only added.
    pub(crate) memo: Option<crate::pass::PassMemo>,
    /// Full passes run so far (a pass after added jobs may be cut short instead).
    pub(crate) full_passes: u64,
    /// Running jobs told to stop (preempted), until they end.
    pub(crate) notices: BTreeMap<JobId, crate::preempt::Notice>,
    /// Preempted jobs back in the queue, with the job they were stopped for: they wait until
    /// it has started (or left the queue).
    pub(crate) yielding: BTreeMap<JobId, JobId>,
    /// Reservations, by name.
    pub(crate) reservations: BTreeMap<String, crate::reservation::Reservation>,
    /// Running jobs whose GPUs went back to the pool (see [`suspend`]).
    pub(crate) suspended: BTreeMap<JobId, suspend::Suspension>,
}

impl Scheduler {
    /// A scheduler with these partitions, the default policy and no nodes.
    pub fn new(partitions: Vec<Partition>) -> Result<Scheduler, PartitionConfigError> {
        Scheduler::with_policy(partitions, Policy::default())
    }

    /// A scheduler with these partitions and this policy.
    pub fn with_policy(
        partitions: Vec<Partition>,
        policy: Policy,
    ) -> Result<Scheduler, PartitionConfigError> {
        check_partitions(&partitions)?;
        Ok(Scheduler {
            chain: Chain::for_policy(&policy.placement),
            partitions,
            policy,
            nodes: BTreeMap::new(),
            node_order: Vec::new(),
            pending: BTreeMap::new(),
            running: BTreeMap::new(),
            reasons: BTreeMap::new(),
            notes: BTreeMap::new(),
            accounts: BTreeMap::new(),
            user_limits: BTreeMap::new(),
            balances: BTreeMap::new(),
            usage: UsageBook::default(),
            runtimes: RuntimeBook::default(),
            outcomes: BTreeMap::new(),
            last_pass: None,
            memo: None,
            full_passes: 0,
            notices: BTreeMap::new(),
            yielding: BTreeMap::new(),
            reservations: BTreeMap::new(),
            suspended: BTreeMap::new(),
        })
    }

    /// The configured partitions.
    pub fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The placement chain.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// Adds a node, or updates the spec of a known one and marks it up.
    pub fn upsert_node(&mut self, spec: NodeSpec) -> Result<(), NodeError> {
        if spec.gpus.len() > 64 || spec.gpus.iter().any(|g| g.index >= 64) {
            return Err(NodeError {
                node: spec.name.clone(),
                gpus: spec.gpus.len(),
            });
        }
        match self.nodes.get_mut(&spec.name) {
            Some(node) => {
                node.spec = spec;
                node.down = None;
                node.not_responding = None;
            }
            None => {
                self.nodes.insert(spec.name.clone(), Node::new(spec));
                self.node_order = self.nodes.keys().cloned().collect();
                if let Some(seed) = self.policy.placement.node_order_seed {
                    shuffle(&mut self.node_order, seed);
                }
            }
        }
        Ok(())
    }

    /// Marks a node down (with a reason) or up (`None`). False when the node is unknown.
    pub fn set_node_down(&mut self, name: &str, reason: Option<String>) -> bool {
        self.nodes.get_mut(name).map(|n| n.down = reason).is_some()
    }

    /// Marks a node not responding (with a reason) or answering again (`None`). False when the
    /// node is unknown.
    pub fn set_node_not_responding(&mut self, name: &str, reason: Option<String>) -> bool {
        self.nodes
            .get_mut(name)
            .map(|n| n.not_responding = reason)
            .is_some()
    }

    /// Marks a node draining (with a reason) or resumes it (`None`). False when unknown.
    pub fn set_node_drain(&mut self, name: &str, reason: Option<String>) -> bool {
        self.nodes.get_mut(name).map(|n| n.drain = reason).is_some()
    }

    /// Sets the GPUs foreign load takes on `name` ([`Node::set_foreign`]); None when the node
    /// is unknown.
    pub fn set_foreign(
        &mut self,
        name: &str,
        wanted: &BTreeMap<Option<String>, u32>,
    ) -> Option<Vec<u32>> {
        self.nodes.get_mut(name).map(|n| n.set_foreign(wanted))
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// Every node, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// Adds or replaces an account.
    pub fn set_account(&mut self, name: &str, account: Account) {
        self.accounts.insert(name.to_string(), account);
    }

    /// Removes an account; its jobs keep running and waiting, without its limits.
    pub fn remove_account(&mut self, name: &str) -> Option<Account> {
        self.accounts.remove(name)
    }

    /// The accounts, by name.
    pub fn accounts(&self) -> &BTreeMap<String, Account> {
        &self.accounts
    }

    /// Sets one user's own limits (on top of their account's).
    pub fn set_user_limits(&mut self, user: &str, limits: Limits) {
        self.user_limits.insert(user.to_string(), limits);
    }

    /// Users' own limits.
    pub fn user_limits(&self) -> &BTreeMap<String, Limits> {
        &self.user_limits
    }

    /// The account a user's jobs go to when they name none: the first they belong to.
    pub fn default_account(&self, user: &str) -> Option<&str> {
        self.accounts
            .iter()
            .find(|(_, a)| a.members.contains(user))
            .map(|(n, _)| n.as_str())
    }

    /// The limits a job is held to: its user's own, tightened by its account's.
    pub fn limits_for(&self, job: &JobSpec) -> Limits {
        let user = self.user_limits.get(&job.user).cloned().unwrap_or_default();
        match job.account.as_deref().and_then(|a| self.accounts.get(a)) {
            Some(account) => user.tightest(&account.limits),
            None => Limits {
                grp_gpus: None,
                ..user
            },
        }
    }

    /// Tells the scheduler a user's credit balance for this month, charges of ended jobs
    /// included (the running ones it accrues itself).
    pub fn set_balance(&mut self, user: &str, balance: f64) {
        self.balances.insert(user.to_string(), balance);
    }

    /// Forgets every balance (a new month: everyone starts from the grant again).
    pub fn clear_balances(&mut self) {
        self.balances.clear();
    }

    /// A user's balance as last set; the monthly grant when never set.
    pub fn balance(&self, user: &str) -> f64 {
        self.balances
            .get(user)
            .copied()
            .unwrap_or(self.policy.credits.monthly_grant)
    }

    /// Records past GPU use for fair-share (e.g. replayed from history at start-up).
    pub fn record_usage(&mut self, user: &str, gpu_seconds: f64, at: Timestamp) {
        self.usage
            .add(user, gpu_seconds, at, self.policy.weights.half_life_s);
    }

    /// Learns how long a finished job ran against its limit (e.g. replayed from history at
    /// start-up), for start predictions.
    pub fn learn_runtime(&mut self, job: &JobSpec, ran_ms: i64) {
        self.runtimes.learn(job, ran_ms);
    }

    /// Records how a job that others may depend on ended (true: COMPLETED).
    pub fn note_outcome(&mut self, job: JobId, completed: bool) {
        self.outcomes.insert(job, completed);
    }

    /// Jobs waiting, by id.
    pub fn pending(&self) -> impl Iterator<Item = &JobSpec> {
        self.pending.values()
    }

    /// Running jobs and their allocations, by id.
    pub fn running(&self) -> impl Iterator<Item = (&JobSpec, &Allocation)> {
        self.running.values().map(|(j, a)| (j, a))
    }

    /// A running job's allocation.
    pub fn allocation(&self, id: JobId) -> Option<&Allocation> {
        self.running.get(&id).map(|(_, a)| a)
    }

    /// A waiting or running job.
    pub fn job(&self, id: JobId) -> Option<&JobSpec> {
        self.pending
            .get(&id)
            .or_else(|| self.running.get(&id).map(|(j, _)| j))
    }

    /// The reason a pending job gave in the last pass.
    pub fn pending_reason(&self, job: JobId) -> Option<&PendingReason> {
        self.reasons.get(&job)
    }

    /// Where a waiting job stood in the last pass: priority factors, the stage that stopped it
    /// and its per-stage rejections.
    pub fn explain(&self, job: JobId) -> Option<&JobNote> {
        self.notes.get(&job)
    }

    /// Full passes run so far: a pass after jobs were only added may be cut short instead
    /// (see [`Scheduler::schedule_appended`]).
    pub fn full_passes(&self) -> u64 {
        self.full_passes
    }

    /// When [`Scheduler::schedule`] last ran.
    pub fn last_pass(&self) -> Option<Timestamp> {
        self.last_pass
    }
}

/// A seeded Fisher-Yates shuffle (splitmix64), so that node order ties break the same way for
/// the same seed.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}
