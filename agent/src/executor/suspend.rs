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
    /// Suspends `attempt` of `job`, which gives back `gpus`, or (`resumed`) resumes it on
    /// them, which it holds again; reports what came of it.
    pub(super) fn checkpoint(&self, job: u64, attempt: u32, gpus: Vec<u32>, resumed: bool) {
        let me = self.clone();
        tokio::spawn(async move {
            let done = if resumed {
                me.try_resume(job, attempt, &gpus).await
            } else {
                me.try_suspend(job, attempt, &gpus).await
            };
            let failed = done.err();
            if let Some(why) = &failed {
                let what = if resumed { "resume" } else { "suspend" };
                tracing::warn!(job, attempt, ?gpus, "cannot {what}: {why}");
            }
            me.report(AgentReport::Checkpoint {
                node: me.node.clone(),
                job,
                attempt,
                resumed,
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
        let devices = self.devices_of(gpus);
        if devices.len() != gpus.len() {
            return Err(format!(
                "the device numbers of GPUs {gpus:?} are not known here"
            ));
        }
        let name = super::cgroup_name(&dir);
        // First the card is kept from it: nothing of it opens the card from now on.
        let withheld = labpool_isolation::withhold(&self.isolation.support, &name, &devices)
            .map_err(|e| format!("cannot withhold its GPUs from it: {e}"))?;
        if matches!(withheld, labpool_isolation::Withheld::Nothing) {
            return Err(
                "this node puts jobs in no device cgroup, so the card could not be kept from it"
                    .to_string(),
            );
        }
        let give_back = |w: labpool_isolation::Withheld| {
            if let Err(e) = w.give_back() {
                tracing::warn!(
                    job,
                    attempt,
                    "cannot give its GPUs back after a failed suspend: {e}"
                );
            }
        };
        let all = self.processes(&dir, &name);
        let pids = match tool.cuda_processes(&all).await {
            Ok(pids) if !pids.is_empty() => pids,
            Ok(_) => {
                give_back(withheld);
                return Err(format!(
                    "none of its {} processes holds a CUDA context",
                    all.len()
                ));
            }
            Err(e) => {
                give_back(withheld);
                return Err(e);
            }
        };
        if let Err(e) = tool.suspend(&pids).await {
            give_back(withheld);
            return Err(e);
        }
        // Then nothing of it may still hold the card it lends.
        let holding = crate::procs::holding_devices(&all, &devices);
        if let Some((pid, comm, (major, minor))) = holding.first() {
            if let Err(back) = tool.resume(&pids).await {
                tracing::warn!(
                    job,
                    attempt,
                    "cannot restore after a failed suspend: {back}"
                );
            }
            give_back(withheld);
            return Err(format!(
                "its process {pid} ({comm}) still has the card ({major}:{minor}) open after the checkpoint"
            ));
        }
        tracing::info!(job, attempt, ?pids, "suspended: GPU state in host memory");
        self.suspended
            .lock()
            .expect("not poisoned")
            .insert((job, attempt), Suspended { pids, withheld });
        Ok(())
    }

    /// The processes of the attempt in `dir`, whose cgroup is `name`: those in its cgroup,
    /// which a member cannot leave, and those that carry its key; in pid order.
    fn processes(&self, dir: &JobDir, name: &str) -> Vec<i32> {
        let mut all: Vec<i32> =
            labpool_isolation::group_pids(&self.isolation.support, name).unwrap_or_default();
        all.extend(
            crate::procs::job_processes(&dir.key())
                .iter()
                .map(|p| p.as_raw()),
        );
        all.sort_unstable();
        all.dedup();
        all
    }

    /// The device numbers of `gpus` on this node.
    fn devices_of(&self, gpus: &[u32]) -> Vec<(u32, u32)> {
        gpus.iter()
            .filter_map(|g| self.isolation.gpu_minors.get(g))
            .map(|minor| (labpool_isolation::NVIDIA_MAJOR, *minor))
            .collect()
    }

    async fn try_resume(&self, job: u64, attempt: u32, gpus: &[u32]) -> Result<(), String> {
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
                // The agent restarted since: the rules are written again to be lifted (cgroup
                // v2's filter cannot be: the job is stopped rather than run without its rule),
                // and the processes say what they are.
                let dir = JobDir::new(&self.spool, job, attempt);
                let name = super::cgroup_name(&dir);
                let devices = self.devices_of(gpus);
                labpool_isolation::Withheld::again(&self.isolation.support, &name, &devices)
                    .ok_or("the agent restarted while it was suspended, and its GPU's cgroup v2 filter cannot be lifted without it")?
                    .give_back()
                    .map_err(|e| format!("cannot give its GPUs back to it: {e}"))?;
                tool.checkpointed(&self.processes(&dir, &name)).await
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
