//! The scheduler: a synchronous state machine. Events come in as method calls (a job submitted,
//! a job ended, a node joined or went down, an account changed); [`Scheduler::schedule`] turns
//! the state into decisions (start job J on node N with GPUs [..], keep it waiting for reason R,
//! stage dataset D on node N ahead of a predicted start). The pass itself is in [`crate::pass`].
//!
//! It reads no clock and does no I/O; every map it iterates is ordered, so the same calls give
//! the same decisions. The controller drives it with the wall clock and the simulator with a
//! simulated one.

use crate::admission::{AdmissionError, AdmitRequest, Admitted, NodeShape, explain_misfit};
use crate::cache_view::NoCache;
use crate::job::{Allocation, JobId, JobSpec, JobState};
use crate::node::{Node, NodeSpec};
use crate::partition::{Partition, PartitionConfigError, check_partitions};
use crate::placement::{Candidate, Chain, PlacementContext};
use crate::policy::{Account, Limits, Policy};
use crate::priority::{Factors, UsageBook};
use crate::profile::Profile;
use crate::reason::PendingReason;
use crate::runtime::RuntimeBook;
use crate::time::{TimeLimit, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

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

    /// Marks a node draining (with a reason) or resumes it (`None`). False when unknown.
    pub fn set_node_drain(&mut self, name: &str, reason: Option<String>) -> bool {
        self.nodes.get_mut(name).map(|n| n.drain = reason).is_some()
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

    /// When [`Scheduler::schedule`] last ran.
    pub fn last_pass(&self) -> Option<Timestamp> {
        self.last_pass
    }

    fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// Decides whether jobs may enter the queue: partition, account, time limit, the emergency
    /// lane's cap, the submit limit, and whether any node could ever take them. A job that could
    /// run later is admitted.
    pub fn admit(&self, req: &AdmitRequest<'_>) -> Result<Admitted, AdmissionError> {
        let default = self
            .partitions
            .iter()
            .find(|p| p.default)
            .expect("checked at construction");
        let part = match req.partition {
            None => default,
            Some(name) => self
                .partition(name)
                .ok_or_else(|| AdmissionError::UnknownPartition {
                    name: name.to_string(),
                    known: self
                        .partitions
                        .iter()
                        .map(|p| {
                            if p.default {
                                format!("{} (default)", p.name)
                            } else {
                                p.name.clone()
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                    default: default.name.clone(),
                })?,
        };
        let account = match req.account {
            Some(name) => {
                let Some(a) = self.accounts.get(name) else {
                    let known: Vec<&str> = self.accounts.keys().map(String::as_str).collect();
                    return Err(AdmissionError::UnknownAccount {
                        name: name.to_string(),
                        known: if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        },
                    });
                };
                if !a.members.contains(req.user) {
                    let mine: Vec<&str> = self
                        .accounts
                        .iter()
                        .filter(|(_, a)| a.members.contains(req.user))
                        .map(|(n, _)| n.as_str())
                        .collect();
                    return Err(AdmissionError::NotMember {
                        user: req.user.to_string(),
                        account: name.to_string(),
                        mine: if mine.is_empty() {
                            "none".to_string()
                        } else {
                            mine.join(", ")
                        },
                    });
                }
                Some(name.to_string())
            }
            None => self.default_account(req.user).map(str::to_string),
        };
        if let Some(allowed) = &part.allow_accounts
            && !account.as_ref().is_some_and(|a| allowed.contains(a))
        {
            return Err(AdmissionError::PartitionNotAllowed {
                partition: part.name.clone(),
                allowed: if allowed.is_empty() {
                    "none yet".to_string()
                } else {
                    allowed.join(", ")
                },
                account: account.clone().unwrap_or_else(|| "no account".to_string()),
            });
        }
        if let Some(max) = part.max_gpus_per_job
            && req.resources.gpus > max
        {
            return Err(AdmissionError::PartitionGpuCap {
                partition: part.name.clone(),
                max,
                requested: req.resources.gpus,
            });
        }
        let time_limit = match (req.time_limit, part.max_time) {
            (None, _) => part.default_time,
            (Some(TimeLimit::Unlimited), max) => max,
            (Some(TimeLimit::Seconds(s)), TimeLimit::Seconds(m)) if s > m => {
                return Err(AdmissionError::TimeOverMax {
                    requested: TimeLimit::Seconds(s),
                    partition: part.name.clone(),
                    max: part.max_time,
                });
            }
            (Some(t), _) => t,
        };
        if req.emergency {
            let c = &self.policy.credits;
            let too_long = match time_limit {
                TimeLimit::Unlimited => true,
                TimeLimit::Seconds(s) => s > c.emergency_max_time_s,
            };
            if req.resources.gpus > c.emergency_max_gpus || too_long {
                return Err(AdmissionError::EmergencyTooBig {
                    max_gpus: c.emergency_max_gpus,
                    max_time: TimeLimit::Seconds(c.emergency_max_time_s),
                    gpus: req.resources.gpus,
                    time: time_limit,
                });
            }
        }
        let probe = JobSpec {
            user: req.user.to_string(),
            account: account.clone(),
            partition: part.name.clone(),
            resources: req.resources.clone(),
            time_limit,
            ..JobSpec::default()
        };
        if let Some(max) = self.limits_for(&probe).max_submit_jobs_per_user {
            let queued = self
                .pending
                .values()
                .chain(self.running.values().map(|(j, _)| j))
                .filter(|j| j.user == req.user)
                .count() as u32;
            if queued + req.count.max(1) > max {
                return Err(AdmissionError::SubmitLimit {
                    user: req.user.to_string(),
                    queued,
                    adding: req.count.max(1),
                    max,
                });
            }
        }
        let ctx = PlacementContext {
            partition: part,
            now: Timestamp(0),
            cache: &NoCache,
        };
        let fits = self.nodes.values().any(|node| {
            let profile = Profile::new(Timestamp(0), node.free_capacity());
            self.chain.statically_fits(
                &probe,
                &Candidate {
                    node,
                    profile: &profile,
                },
                &ctx,
            )
        });
        if !fits {
            let shapes: Vec<NodeShape<'_>> = self
                .nodes
                .values()
                .filter(|n| part.has_node(n.name()))
                .map(|n| NodeShape {
                    name: n.name(),
                    gpu_types: n.spec.gpus.iter().map(|g| g.gpu_type.as_str()).collect(),
                    gpu_shareable: n.spec.gpus.iter().map(|g| g.shareable()).collect(),
                    cpus: n.spec.cpus,
                    mem_mib: n.spec.mem_mib,
                })
                .collect();
            return Err(explain_misfit(&part.name, &shapes, req.resources));
        }
        Ok(Admitted {
            partition: part.name.clone(),
            time_limit,
            account,
        })
    }

    /// Queues an admitted job.
    pub fn enqueue(&mut self, job: JobSpec) {
        self.pending.insert(job.id, job);
    }

    /// Puts back a job that was running before a restart, holding what it held. A whole
    /// allocation is refused where any job holds one of its GPUs; a shared one (`alloc.shared`)
    /// where one of its GPUs is held whole or already has `share` sharers (a lone sharer is put
    /// back even on a GPU whose `share` was lowered to 1 since, and holds it alone).
    pub fn restore_running(&mut self, job: JobSpec, alloc: Allocation) -> Result<(), RestoreError> {
        let err = |problem: String| RestoreError {
            job: job.id,
            node: alloc.node.clone(),
            problem,
        };
        let Some(node) = self.nodes.get_mut(&alloc.node) else {
            return Err(err("the node is not known".to_string()));
        };
        for g in &alloc.gpus {
            let Some(device) = node.spec.gpus.iter().find(|d| d.index == *g) else {
                return Err(err(format!("GPU {g} no longer exists there")));
            };
            if let Some(other) = node.gpu_owner(*g) {
                return Err(err(format!("GPU {g} is already held by job {other}")));
            }
            let sharers: Vec<String> = node.gpu_sharers(*g).map(|j| j.to_string()).collect();
            if !alloc.shared && !sharers.is_empty() {
                return Err(err(format!(
                    "GPU {g} is already shared by jobs {}",
                    sharers.join(", ")
                )));
            }
            if alloc.shared && sharers.len() as u32 >= device.share.max(1) {
                return Err(err(format!(
                    "GPU {g} already has {} sharing jobs ({}), its share",
                    sharers.len(),
                    sharers.join(", ")
                )));
            }
        }
        node.hold(job.id, &alloc);
        self.pending.remove(&job.id);
        self.reasons.remove(&job.id);
        self.notes.remove(&job.id);
        self.running.insert(job.id, (job, alloc));
        Ok(())
    }

    /// Removes a waiting job (cancelled). `None` when it was not waiting.
    pub fn remove_pending(&mut self, job: JobId) -> Option<JobSpec> {
        self.reasons.remove(&job);
        self.notes.remove(&job);
        let spec = self.pending.remove(&job)?;
        self.outcomes.insert(job, false);
        Some(spec)
    }

    /// A running job ended at `end` in `state`: frees what it held, and counts its GPU time
    /// toward its user's fair-share usage. `None` when it was not running.
    pub fn finish(
        &mut self,
        job: JobId,
        state: JobState,
        end: Timestamp,
    ) -> Option<(JobSpec, Allocation)> {
        let (spec, alloc) = self.running.remove(&job)?;
        if let Some(node) = self.nodes.get_mut(&alloc.node) {
            node.release(job, &alloc);
        }
        let gpu_seconds = alloc.gpus.len() as f64 * end.secs_since(alloc.start) as f64;
        self.usage.add(
            &spec.user,
            gpu_seconds,
            end,
            self.policy.weights.half_life_s,
        );
        self.outcomes.insert(job, state == JobState::Completed);
        Some((spec, alloc))
    }

    /// What a job owes for its allocated time up to `end`: for each GPU, hours held times the
    /// weight of that GPU's type.
    pub fn charge_for(&self, alloc: &Allocation, end: Timestamp) -> f64 {
        let node = self.nodes.get(&alloc.node);
        let secs = end.secs_since(alloc.start);
        alloc
            .gpus
            .iter()
            .map(|g| {
                let ty = node
                    .and_then(|n| n.spec.gpus.iter().find(|d| d.index == *g))
                    .map_or("", |d| d.gpu_type.as_str());
                self.policy.credits.charge(1, ty, secs)
            })
            .fold(0.0, |total, c| total + c)
    }

    /// Credits the user's running jobs have used so far.
    pub fn accrued(&self, user: &str, now: Timestamp) -> f64 {
        self.running
            .values()
            .filter(|(j, _)| j.user == user)
            .map(|(_, a)| self.charge_for(a, now))
            // fold from +0.0: an empty f64 sum() is -0.0, which prints as "-0.00".
            .fold(0.0, |total, c| total + c)
    }

    /// A placed job whose datasets were being staged starts now: its time limit, charge and
    /// fair-share usage count from `at`, not from its placement. False when it was not placed.
    pub fn set_started(&mut self, job: JobId, at: Timestamp) -> bool {
        match self.running.get_mut(&job) {
            Some((_, alloc)) => {
                alloc.start = at;
                true
            }
            None => false,
        }
    }

    /// A running job goes back to the queue, keeping its place (its submit time).
    pub fn requeue(&mut self, job: JobId) -> bool {
        let Some((spec, alloc)) = self.running.remove(&job) else {
            return false;
        };
        if let Some(node) = self.nodes.get_mut(&alloc.node) {
            node.release(job, &alloc);
        }
        self.pending.insert(job, spec);
        true
    }

    /// Checks what must always hold: no GPU is given twice (a GPU has one whole holder, or up to
    /// its `share` sharing holders, never both), no node is over-committed, and the nodes' books
    /// agree with the running jobs'. Tests call it after every step.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (id, (_, alloc)) in &self.running {
            if self.pending.contains_key(id) {
                return Err(format!("job {id} is both pending and running"));
            }
            if !self.nodes.contains_key(&alloc.node) {
                return Err(format!("job {id} runs on unknown node {}", alloc.node));
            }
        }
        for node in self.nodes.values() {
            let mut cpus = 0u32;
            let mut mem = 0u64;
            // Per GPU: its whole holder, and its sharing holders.
            let mut whole: BTreeMap<u32, JobId> = BTreeMap::new();
            let mut sharers: BTreeMap<u32, Vec<JobId>> = BTreeMap::new();
            let mut gpus: BTreeSet<(u32, JobId)> = BTreeSet::new();
            for (id, (_, alloc)) in self
                .running
                .iter()
                .filter(|(_, (_, a))| a.node == node.name())
            {
                cpus += alloc.cpus;
                mem += alloc.mem_mib;
                for g in &alloc.gpus {
                    let Some(device) = node.spec.gpus.iter().find(|d| d.index == *g) else {
                        return Err(format!(
                            "job {id} holds GPU {g} that {} does not have",
                            node.name()
                        ));
                    };
                    if !gpus.insert((*g, *id)) {
                        return Err(format!("job {id} holds GPU {g} on {} twice", node.name()));
                    }
                    if alloc.shared {
                        let on = sharers.entry(*g).or_default();
                        on.push(*id);
                        if on.len() as u32 > device.share.max(1) {
                            return Err(format!(
                                "GPU {g} on {} is shared by jobs {on:?}, over its share of {}",
                                node.name(),
                                device.share
                            ));
                        }
                    } else if let Some(other) = whole.insert(*g, *id) {
                        return Err(format!(
                            "GPU {g} on {} is held by jobs {other} and {id}",
                            node.name()
                        ));
                    }
                    if let (Some(w), Some(on)) = (whole.get(g), sharers.get(g)) {
                        return Err(format!(
                            "GPU {g} on {} is held whole by job {w} and shared by jobs {on:?}",
                            node.name()
                        ));
                    }
                }
            }
            for g in node.spec.gpus.iter().map(|d| d.index) {
                if node.gpu_owner(g) != whole.get(&g).copied() {
                    return Err(format!(
                        "{}: GPU {g} is held whole by {:?} but the books say {:?}",
                        node.name(),
                        whole.get(&g),
                        node.gpu_owner(g)
                    ));
                }
            }
            let held: BTreeSet<(u32, JobId)> = node.held_gpus().collect();
            if held != gpus {
                return Err(format!(
                    "{}: GPU books {held:?} disagree with running jobs {gpus:?}",
                    node.name()
                ));
            }
            if node.used() != (cpus, mem) {
                return Err(format!(
                    "{}: used {:?} but running jobs hold {:?}",
                    node.name(),
                    node.used(),
                    (cpus, mem)
                ));
            }
            if cpus > node.spec.cpus || mem > node.spec.mem_mib {
                return Err(format!(
                    "{} is over-committed: {cpus} CPUs, {mem} MiB",
                    node.name()
                ));
            }
        }
        Ok(())
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
