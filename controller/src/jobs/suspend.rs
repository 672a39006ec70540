//! Suspending idle sessions on the engine: the idle rule asks, the engine checks that the
//! session and its node can be suspended and orders its node to checkpoint it; the node's
//! answer goes through the lifecycle (its GPUs go back to the scheduler) or, when it failed,
//! stops the session as the idle rule would have. A member who comes back makes it want its
//! GPUs; each pass gives them back to the sessions whose GPUs are free, and their nodes
//! restore them.

use crate::api::agent::AgentOrder;
use crate::engine::Engine;
use labpool_lifecycle::Event;
use labpool_scheduler::{JobId, JobState, Timestamp};

/// How long a node has to answer a suspend or a resume (each of its steps is bounded to a
/// minute); silence past it (a lost order, an agent restarted mid-way) stops the session.
const ANSWER_WITHIN_MS: i64 = 5 * 60_000;

impl Engine {
    /// Orders `job`'s node to suspend it; its GPUs, or why it is stopped instead.
    pub(crate) fn suspend_idle(&mut self, job: u64) -> Result<Vec<u32>, String> {
        if !self.config.jobs.suspend_idle {
            return Err("suspend_idle is off under [jobs]".to_string());
        }
        let Some(row) = self.jobs.job(job) else {
            return Err(format!("job {job} is not active"));
        };
        let node = row.node.clone().unwrap_or_default();
        let why_not = if row.state != JobState::Running || !row.request.interactive {
            Some("it is not a running session".to_string())
        } else if row.is_suspended() || self.suspending.contains_key(&job) {
            Some("it is already suspended".to_string())
        } else if row.gpus.len() != 1 || !row.others.is_empty() {
            Some(format!(
                "it holds {} GPUs; only a one-GPU session is suspended",
                row.gpus.len() + row.others.iter().map(|o| o.gpus.len()).sum::<usize>()
            ))
        } else if row.spec.resources.shares_gpus() {
            Some("it shares its GPU with other jobs".to_string())
        } else if row.cancel_requested_by.is_some() || row.requeue_requested_by.is_some() {
            Some("it is being stopped".to_string())
        } else if self
            .nodes_facts
            .get(&node)
            .is_none_or(|f| f.checkpoint.is_none())
        {
            Some(format!(
                "node {node} has no cuda-checkpoint (driver 550 or later)"
            ))
        } else {
            None
        };
        if let Some(why) = why_not {
            return Err(why);
        }
        let (attempt, gpus) = (row.attempt, row.gpus.clone());
        self.suspending.insert(job, self.clock.now_ms());
        self.outbox.order(
            &node,
            AgentOrder::Suspend {
                job,
                attempt,
                gpus: gpus.clone(),
            },
        );
        Ok(gpus)
    }

    /// The member of suspended `job` came back: it takes its GPUs at the first pass they are
    /// free.
    pub(crate) fn want_back(&mut self, job: u64) {
        if self.sched.want_back(JobId(job)) {
            self.pass_need = crate::engine::PassNeed::Full;
        }
    }

    /// Before a pass: the suspended sessions wanted back whose GPUs are free take them, and
    /// their nodes restore them.
    pub(crate) fn take_back(&mut self) {
        let now = Timestamp(self.clock.now_ms());
        for (job, _) in self.sched.take_back(now) {
            self.lifecycle(Event::Resume { job: job.0 });
        }
    }

    /// A node carried out, or failed, a suspend or a resume.
    pub(crate) async fn on_checkpoint(
        &mut self,
        node: String,
        job: u64,
        attempt: u32,
        resumed: bool,
        failed: Option<String>,
    ) {
        // Only the job's own node speaks for its current attempt.
        if self
            .jobs
            .job(job)
            .is_none_or(|r| r.attempt != attempt || r.node.as_deref() != Some(node.as_str()))
        {
            tracing::warn!(
                job,
                attempt,
                node,
                "a checkpoint report for another attempt or node"
            );
            return;
        }
        if resumed {
            self.resuming.remove(&job);
        } else {
            self.suspending.remove(&job);
        }
        let Some(why) = failed else {
            if !resumed {
                self.lifecycle(Event::Suspended { node, job, attempt });
            }
            return;
        };
        self.checkpoint_failed(job, resumed, &why).await;
    }

    /// A suspend or resume failed or went unanswered: the session is stopped, with why.
    async fn checkpoint_failed(&mut self, job: u64, resumed: bool, why: &str) {
        let (event, by) = if resumed {
            (
                "RESTORE_FAILED",
                "labpool: its GPU state could not be restored",
            )
        } else {
            ("SUSPEND_FAILED", "the idle rule")
        };
        let now = self.clock.now_ms();
        if let Err(e) = self.db.note_job_event(job, now, event, why).await {
            tracing::warn!(job, "cannot record {event}: {e}");
        }
        self.lifecycle(Event::Cancel {
            job,
            by: by.to_string(),
        });
    }
}

impl Engine {
    /// The suspends and resumes that went unanswered for [`ANSWER_WITHIN_MS`]: their sessions
    /// are stopped (checked with the nodes' heartbeats).
    pub(crate) async fn check_checkpoints(&mut self) {
        let now = self.clock.now_ms();
        let late = |asked: &std::collections::BTreeMap<u64, i64>| -> Vec<u64> {
            asked
                .iter()
                .filter(|(_, at)| now - **at > ANSWER_WITHIN_MS)
                .map(|(job, _)| *job)
                .collect()
        };
        let why = format!(
            "its node did not answer within {}",
            labpool_units::format_duration(std::time::Duration::from_millis(
                ANSWER_WITHIN_MS as u64
            ))
        );
        for job in late(&self.suspending) {
            self.suspending.remove(&job);
            self.checkpoint_failed(job, false, &why).await;
        }
        for job in late(&self.resuming) {
            self.resuming.remove(&job);
            self.checkpoint_failed(job, true, &why).await;
        }
    }
}
