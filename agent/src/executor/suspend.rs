//! Suspend and resume orders: an idle session's GPU state goes to host memory and its own GPUs
//! are withheld from its processes while they serve other jobs; on resume the GPUs are let
//! back in and the state restored ([`crate::checkpoint`]).

use super::Executor;
use crate::api::agent::AgentReport;
use crate::jobdir::JobDir;
use labpool_isolation::Withheld;

/// What a suspended attempt needs to resume: the processes checkpointed, and the device rules
/// that keep its GPUs from it.
#[derive(Debug)]
pub(super) struct Suspended {
    pids: Vec<i32>,
    withheld: Withheld,
}

impl Executor {
    /// Suspends `attempt` of `job`, which gives back `gpus`.
    pub(super) fn suspend(&self, job: u64, attempt: u32, gpus: Vec<u32>) {
        let me = self.clone();
        tokio::spawn(async move {
            let failed = me.try_suspend(job, attempt, &gpus).await.err();
            if let Some(why) = &failed {
                tracing::warn!(job, attempt, "cannot suspend: {why}");
            }
            me.report(AgentReport::Checkpoint {
                node: me.node.clone(),
                job,
                attempt,
                resumed: false,
                failed,
            });
        });
    }

    async fn try_suspend(&self, job: u64, attempt: u32, gpus: &[u32]) -> Result<(), String> {
        let Some(tool) = self.checkpoint.clone() else {
            return Err("this node has no cuda-checkpoint".to_string());
        };
        let dir = JobDir::new(&self.spool, job, attempt);
        if dir.started().is_none() || dir.status().is_some() {
            return Err(format!("job {job} is not running here"));
        }
        let all: Vec<i32> = crate::procs::job_processes(&dir.key())
            .iter()
            .map(|p| p.as_raw())
            .collect();
        let pids = tool.cuda_processes(&all).await;
        if pids.is_empty() {
            return Err(format!(
                "none of its {} processes holds a CUDA context",
                all.len()
            ));
        }
        tool.suspend(&pids).await?;
        let devices: Vec<(u32, u32)> = gpus
            .iter()
            .filter_map(|g| self.isolation.gpu_minors.get(g))
            .map(|minor| (labpool_isolation::NVIDIA_MAJOR, *minor))
            .collect();
        let name = super::cgroup_name(&dir);
        match labpool_isolation::withhold(&self.isolation.support, &name, &devices) {
            Ok(withheld) => {
                tracing::info!(job, attempt, ?pids, "suspended: GPU state in host memory");
                self.suspended
                    .lock()
                    .expect("not poisoned")
                    .insert((job, attempt), Suspended { pids, withheld });
                Ok(())
            }
            Err(e) => {
                // Its GPUs cannot be kept from it: it must not give them back.
                if let Err(back) = tool.resume(&pids).await {
                    tracing::warn!(
                        job,
                        attempt,
                        "cannot restore after a failed suspend: {back}"
                    );
                }
                Err(format!("cannot withhold its GPUs from it: {e}"))
            }
        }
    }

    /// Resumes `attempt` of `job` on `gpus`, which it holds again.
    pub(super) fn resume(&self, job: u64, attempt: u32, gpus: Vec<u32>) {
        let me = self.clone();
        tokio::spawn(async move {
            let failed = me.try_resume(job, attempt).await.err();
            if let Some(why) = &failed {
                tracing::warn!(job, attempt, ?gpus, "cannot resume: {why}");
            }
            me.report(AgentReport::Checkpoint {
                node: me.node.clone(),
                job,
                attempt,
                resumed: true,
                failed,
            });
        });
    }

    async fn try_resume(&self, job: u64, attempt: u32) -> Result<(), String> {
        let Some(tool) = self.checkpoint.clone() else {
            return Err("this node has no cuda-checkpoint".to_string());
        };
        let kept = self
            .suspended
            .lock()
            .expect("not poisoned")
            .remove(&(job, attempt));
        let pids = match kept {
            Some(s) => {
                s.withheld
                    .give_back()
                    .map_err(|e| format!("cannot give its GPUs back to it: {e}"))?;
                s.pids
            }
            None => {
                // The agent restarted since: the processes say what they are.
                let dir = JobDir::new(&self.spool, job, attempt);
                let all: Vec<i32> = crate::procs::job_processes(&dir.key())
                    .iter()
                    .map(|p| p.as_raw())
                    .collect();
                tool.checkpointed(&all).await
            }
        };
        if pids.is_empty() {
            return Err("no process of it is checkpointed".to_string());
        }
        tool.resume(&pids).await?;
        tracing::info!(job, attempt, ?pids, "resumed: GPU state restored");
        Ok(())
    }
}
