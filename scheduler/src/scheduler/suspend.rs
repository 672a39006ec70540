//! Suspended jobs: an idle session whose GPU state was checkpointed to host memory gives its
//! GPUs back to the pool while its processes live on (its cores and memory stay held), and
//! takes them back when its owner returns and they are free.
//!
//! It takes back the same GPUs it gave: its processes' `CUDA_VISIBLE_DEVICES`, its cgroup's
//! device rules and its checkpoint all name them. Only a job on one node holding its GPUs whole
//! is suspended. Its time limit runs on while it is suspended; its charge and fair-share usage
//! do not (the span is cut out of its allocation's start when it resumes).

use super::Scheduler;
use crate::job::{Allocation, JobId, Part};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// A running job whose GPUs went back to the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    /// The GPUs it gave back and will take back, on its node.
    pub gpus: Vec<u32>,
    /// When it gave them back.
    pub since: Timestamp,
    /// Its owner came back: it takes its GPUs at the first pass they are free.
    pub wanted: bool,
}

/// Why a running job cannot give its GPUs back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuspendError {
    /// It is not running.
    #[error("job {0} is not running")]
    NotRunning(JobId),
    /// It already gave them back.
    #[error("job {0} is already suspended")]
    AlreadySuspended(JobId),
    /// What it holds cannot be suspended, in words.
    #[error("job {job} cannot be suspended: {why}")]
    Shape {
        /// The job.
        job: JobId,
        /// Why.
        why: String,
    },
}

impl Scheduler {
    /// `job`'s GPUs go back to the pool at `now`; it keeps its cores and memory. Returns the
    /// GPUs it gave.
    pub fn suspend(&mut self, job: JobId, now: Timestamp) -> Result<Vec<u32>, SuspendError> {
        if self.suspended.contains_key(&job) {
            return Err(SuspendError::AlreadySuspended(job));
        }
        let Some((_, alloc)) = self.running.get(&job) else {
            return Err(SuspendError::NotRunning(job));
        };
        let shape = |why: &str| SuspendError::Shape {
            job,
            why: why.to_string(),
        };
        if !alloc.others.is_empty() {
            return Err(shape("it runs on several nodes"));
        }
        if alloc.shared {
            return Err(shape("it shares its GPU with other jobs"));
        }
        if alloc.gpus.is_empty() {
            return Err(shape("it holds no GPU"));
        }
        if self.notices.contains_key(&job) {
            return Err(shape("it is being preempted"));
        }
        let (_, alloc) = self.running.get_mut(&job).expect("checked above");
        let gpus = std::mem::take(&mut alloc.gpus);
        let node = alloc.node.clone();
        self.withdraw_gpus(job, &node, &gpus, false);
        self.suspended.insert(
            job,
            Suspension {
                gpus: gpus.clone(),
                since: now,
                wanted: false,
            },
        );
        Ok(gpus)
    }

    /// Its owner came back: `job` takes its GPUs at the first pass they are free. False when
    /// it is not suspended.
    pub fn want_back(&mut self, job: JobId) -> bool {
        self.suspended
            .get_mut(&job)
            .map(|s| s.wanted = true)
            .is_some()
    }

    /// The suspension of `job`, while it is suspended.
    pub fn suspension(&self, job: JobId) -> Option<&Suspension> {
        self.suspended.get(&job)
    }

    /// Every suspended job, by id.
    pub fn suspensions(&self) -> impl Iterator<Item = (JobId, &Suspension)> {
        self.suspended.iter().map(|(j, s)| (*j, s))
    }

    /// The suspended jobs whose owners came back and whose GPUs are free take them at `now`,
    /// in job order. Returns each with its GPUs. Their allocations' start moves on by the time
    /// they were suspended, so their charge leaves that span out.
    pub fn take_back(&mut self, now: Timestamp) -> Vec<(JobId, Vec<u32>)> {
        let wanted: Vec<JobId> = self
            .suspended
            .iter()
            .filter(|(_, s)| s.wanted)
            .map(|(job, _)| *job)
            .collect();
        let mut out = Vec::new();
        // One at a time: two suspended jobs may wait for the same GPU (a session placed on a
        // lent GPU and suspended in turn); the first in job order gets it.
        for job in wanted {
            let free = self.running.get(&job).is_some_and(|(_, alloc)| {
                self.nodes.get(&alloc.node).is_some_and(|node| {
                    self.suspended[&job]
                        .gpus
                        .iter()
                        .all(|g| node.can_take_back(*g))
                })
            });
            if !free {
                continue;
            }
            let s = self.suspended.remove(&job).expect("listed above");
            let (_, alloc) = self.running.get_mut(&job).expect("checked above");
            alloc.gpus = s.gpus.clone();
            alloc.start = Timestamp(alloc.start.0 + (now.0 - s.since.0).max(0));
            let node = alloc.node.clone();
            self.withdraw_gpus(job, &node, &s.gpus, true);
            out.push((job, s.gpus));
        }
        out
    }

    /// Puts back, after a restart, the suspension of a job restored as running without GPUs.
    pub fn restore_suspension(&mut self, job: JobId, suspension: Suspension) {
        if self.running.contains_key(&job) {
            self.suspended.insert(job, suspension);
        }
    }

    /// Books `gpus` of `node` to `job` (`hold`), or off it.
    fn withdraw_gpus(&mut self, job: JobId, node: &str, gpus: &[u32], hold: bool) {
        if let Some(n) = self.nodes.get_mut(node) {
            let part = Part {
                node,
                gpus,
                cpus: 0,
                mem_mib: 0,
            };
            if hold {
                n.hold(job, part, 0);
                n.refill_foreign();
            } else {
                n.release(job, part, 0);
            }
        }
        self.memo = None;
    }

    /// What `alloc` of `job` is charged as: a suspended job's GPUs up to its suspension.
    pub(crate) fn charged_view(
        &self,
        job: JobId,
        alloc: &Allocation,
        end: Timestamp,
    ) -> Option<(Allocation, Timestamp)> {
        let s = self.suspended.get(&job)?;
        let mut a = alloc.clone();
        a.gpus = s.gpus.clone();
        Some((a, Timestamp(end.0.min(s.since.0))))
    }
}
