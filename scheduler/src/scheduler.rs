//! The scheduler: a synchronous state machine. Events come in as method calls (a job submitted,
//! a job ended, a node joined or went down); [`Scheduler::schedule`] turns the state into
//! decisions (start job J on node N with GPUs [..], or keep it waiting for reason R).
//!
//! It reads no clock and does no I/O; every map it iterates is ordered, so the same calls give
//! the same decisions. The controller drives it with the wall clock and the simulator with a
//! simulated one.

use crate::admission::{AdmissionError, Admitted, NodeShape, explain_misfit};
use crate::job::{Allocation, JobId, JobSpec, Resources};
use crate::node::{Node, NodeSpec};
use crate::partition::{Partition, PartitionConfigError, check_partitions};
use crate::placement::{Chain, PlacementContext};
use crate::reason::PendingReason;
use crate::time::{TimeLimit, Timestamp};
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// What the scheduler decided for one job in a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start the job with this allocation. The scheduler already counts it as running.
    Start {
        /// The job.
        job: JobId,
        /// Where, and what it holds.
        allocation: Allocation,
    },
    /// The job keeps waiting; emitted only when its reason changed.
    Wait {
        /// The job.
        job: JobId,
        /// Why.
        reason: PendingReason,
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

/// The scheduling state of a pool.
pub struct Scheduler {
    partitions: Vec<Partition>,
    chain: Chain,
    nodes: BTreeMap<String, Node>,
    pending: BTreeMap<JobId, JobSpec>,
    running: BTreeMap<JobId, (JobSpec, Allocation)>,
    reasons: BTreeMap<JobId, PendingReason>,
    last_pass: Option<Timestamp>,
}

impl Scheduler {
    /// A scheduler with these partitions and no nodes.
    pub fn new(partitions: Vec<Partition>) -> Result<Scheduler, PartitionConfigError> {
        check_partitions(&partitions)?;
        Ok(Scheduler {
            partitions,
            chain: Chain::default(),
            nodes: BTreeMap::new(),
            pending: BTreeMap::new(),
            running: BTreeMap::new(),
            reasons: BTreeMap::new(),
            last_pass: None,
        })
    }

    /// The configured partitions.
    pub fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// The placement chain.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// Adds a node, or updates the spec of a known one and marks it up.
    pub fn upsert_node(&mut self, spec: NodeSpec) {
        match self.nodes.get_mut(&spec.name) {
            Some(node) => {
                node.spec = spec;
                node.down = None;
            }
            None => {
                self.nodes.insert(spec.name.clone(), Node::new(spec));
            }
        }
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

    /// Jobs waiting, by id.
    pub fn pending(&self) -> impl Iterator<Item = &JobSpec> {
        self.pending.values()
    }

    /// Running jobs and their allocations, by id.
    pub fn running(&self) -> impl Iterator<Item = (&JobSpec, &Allocation)> {
        self.running.values().map(|(j, a)| (j, a))
    }

    /// The reason a pending job gave in the last pass.
    pub fn pending_reason(&self, job: JobId) -> Option<&PendingReason> {
        self.reasons.get(&job)
    }

    /// When [`Scheduler::schedule`] last ran.
    pub fn last_pass(&self) -> Option<Timestamp> {
        self.last_pass
    }

    fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// Decides whether a job may enter the queue: its partition and time limit, and whether any
    /// node could ever take it. A job that could run later is admitted.
    pub fn admit(
        &self,
        partition: Option<&str>,
        time_limit: Option<TimeLimit>,
        resources: &Resources,
    ) -> Result<Admitted, AdmissionError> {
        let default = self
            .partitions
            .iter()
            .find(|p| p.default)
            .expect("checked at construction");
        let part = match partition {
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
        let time_limit = match (time_limit, part.max_time) {
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
        let probe = JobSpec {
            id: JobId(0),
            name: String::new(),
            user: String::new(),
            partition: part.name.clone(),
            resources: resources.clone(),
            time_limit,
            submit_time: Timestamp(0),
        };
        let reserved = BTreeMap::new();
        let ctx = PlacementContext {
            partition: part,
            reserved: &reserved,
        };
        if !self.chain.could_ever_fit(&probe, self.nodes.values(), &ctx) {
            let shapes: Vec<NodeShape<'_>> = self
                .nodes
                .values()
                .filter(|n| part.has_node(n.name()))
                .map(|n| NodeShape {
                    name: n.name(),
                    gpu_types: n.spec.gpus.iter().map(|g| g.gpu_type.as_str()).collect(),
                    cpus: n.spec.cpus,
                    mem_mib: n.spec.mem_mib,
                })
                .collect();
            return Err(explain_misfit(&part.name, &shapes, resources));
        }
        Ok(Admitted {
            partition: part.name.clone(),
            time_limit,
        })
    }

    /// Queues an admitted job.
    pub fn enqueue(&mut self, job: JobSpec) {
        self.pending.insert(job.id, job);
    }

    /// Puts back a job that was running before a restart, holding what it held.
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
            if !node.spec.gpus.iter().any(|d| d.index == *g) {
                return Err(err(format!("GPU {g} no longer exists there")));
            }
            if let Some(other) = node.gpu_owner(*g) {
                return Err(err(format!("GPU {g} is already held by job {other}")));
            }
        }
        node.hold(job.id, &alloc);
        self.pending.remove(&job.id);
        self.reasons.remove(&job.id);
        self.running.insert(job.id, (job, alloc));
        Ok(())
    }

    /// Removes a waiting job (cancelled). `None` when it was not waiting.
    pub fn remove_pending(&mut self, job: JobId) -> Option<JobSpec> {
        self.reasons.remove(&job);
        self.pending.remove(&job)
    }

    /// A running job ended: frees what it held. `None` when it was not running.
    pub fn finish(&mut self, job: JobId) -> Option<(JobSpec, Allocation)> {
        let (spec, alloc) = self.running.remove(&job)?;
        if let Some(node) = self.nodes.get_mut(&alloc.node) {
            node.release(job, &alloc);
        }
        Some((spec, alloc))
    }

    /// A running job goes back to the queue, keeping its place (its submit time).
    pub fn requeue(&mut self, job: JobId) -> bool {
        match self.finish(job) {
            Some((spec, _)) => {
                self.pending.insert(job, spec);
                true
            }
            None => false,
        }
    }

    /// Waiting jobs in the order they are considered: partition priority, then submit time.
    pub fn priority_order(&self) -> Vec<JobId> {
        let prio = |j: &JobSpec| self.partition(&j.partition).map_or(0, |p| p.priority);
        let mut order: Vec<&JobSpec> = self.pending.values().collect();
        order.sort_by_key(|j| (Reverse(prio(j)), j.submit_time, j.id));
        order.into_iter().map(|j| j.id).collect()
    }

    /// One scheduling pass at time `now`. Jobs are taken in priority order; a job that is
    /// blocked by busy resources holds the nodes it is waiting for, so that smaller jobs behind
    /// it cannot take them first and starve it.
    pub fn schedule(&mut self, now: Timestamp) -> Vec<Decision> {
        self.last_pass = Some(now);
        let mut decisions = Vec::new();
        let mut reserved: BTreeMap<String, JobId> = BTreeMap::new();
        for id in self.priority_order() {
            let job = &self.pending[&id];
            let Some(partition) = self.partition(&job.partition) else {
                let reason = PendingReason::new(
                    "PartitionDown",
                    format!(
                        "partition {} is no longer configured; cancel and resubmit",
                        job.partition
                    ),
                );
                self.note_reason(id, reason, &mut decisions);
                continue;
            };
            let ctx = PlacementContext {
                partition,
                reserved: &reserved,
            };
            match self.chain.place(job, self.nodes.values(), &ctx) {
                Ok(choice) => {
                    let job = self.pending.remove(&id).expect("job is pending");
                    let allocation = Allocation {
                        node: choice.node,
                        gpus: choice.gpus,
                        cpus: job.resources.cpus,
                        mem_mib: job.resources.mem_mib,
                    };
                    self.nodes
                        .get_mut(&allocation.node)
                        .expect("placed on a known node")
                        .hold(id, &allocation);
                    self.reasons.remove(&id);
                    self.running.insert(id, (job, allocation.clone()));
                    decisions.push(Decision::Start {
                        job: id,
                        allocation,
                    });
                }
                Err(rejections) => {
                    let holders: Vec<(String, u64)> = reserved
                        .iter()
                        .filter(|(n, _)| partition.has_node(n))
                        .map(|(n, j)| (n.clone(), j.0))
                        .collect();
                    let reason = PendingReason::from_rejections(&rejections, &holders);
                    for node in rejections.busy_nodes {
                        reserved.entry(node).or_insert(id);
                    }
                    self.note_reason(id, reason, &mut decisions);
                }
            }
        }
        decisions
    }

    fn note_reason(&mut self, id: JobId, reason: PendingReason, decisions: &mut Vec<Decision>) {
        if self.reasons.get(&id) != Some(&reason) {
            self.reasons.insert(id, reason.clone());
            decisions.push(Decision::Wait { job: id, reason });
        }
    }

    /// Checks what must always hold: no GPU is given twice, no node is over-committed, and the
    /// nodes' books agree with the running jobs'. Tests call it after every step.
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
            let mut gpus: BTreeMap<u32, JobId> = BTreeMap::new();
            for (id, (_, alloc)) in self
                .running
                .iter()
                .filter(|(_, (_, a))| a.node == node.name())
            {
                cpus += alloc.cpus;
                mem += alloc.mem_mib;
                for g in &alloc.gpus {
                    if let Some(other) = gpus.insert(*g, *id) {
                        return Err(format!(
                            "GPU {g} on {} is held by jobs {other} and {id}",
                            node.name()
                        ));
                    }
                    if !node.spec.gpus.iter().any(|d| d.index == *g) {
                        return Err(format!(
                            "job {id} holds GPU {g} that {} does not have",
                            node.name()
                        ));
                    }
                }
            }
            let held: BTreeMap<u32, JobId> = node.held_gpus().collect();
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
