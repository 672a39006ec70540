//! After the agent or the controller restarts: the attempts the controller expects on this
//! node are found in the spool and watched again, and every other one is stopped.

use super::{ADOPTED_POLL, Executor};
use crate::api::agent::AgentReport;
use crate::jobdir::{JobDir, Liveness};
use crate::shim::signal_shim;
use labpool_scheduler::JobState;
use std::collections::BTreeSet;

impl Executor {
    /// Answers the controller's `Adopt`: the attempts it expects here are watched again (an
    /// end already reported is sent again), and every other attempt found here is stopped.
    pub(super) fn adopt(&self, expected: Vec<(u64, u32)>) {
        let expected_set: BTreeSet<(u64, u32)> = expected.iter().copied().collect();
        for (job, attempt) in expected {
            let again = self.reported.lock().expect("not poisoned");
            if let Some(r) = again.get(&(job, attempt)).cloned() {
                self.report(r);
                continue;
            }
            drop(again);
            // Started or adopted by this process already (a remote agent registering again):
            // it is watched, and its shim may not have recorded its start yet, so the job
            // directory must not be read as "never started".
            if self
                .shims
                .lock()
                .expect("not poisoned")
                .contains_key(&(job, attempt))
            {
                self.report(AgentReport::Adopted {
                    node: self.node.clone(),
                    job,
                    attempt,
                });
                continue;
            }
            let dir = JobDir::new(&self.spool, job, attempt);
            match dir.inspect() {
                Ok(Liveness::Alive) => {
                    if let Some(pid) = dir.shim_pid() {
                        self.shims
                            .lock()
                            .expect("not poisoned")
                            .insert((job, attempt), pid);
                    }
                    tracing::info!(job, attempt, "re-adopted running job");
                    self.report(AgentReport::Adopted {
                        node: self.node.clone(),
                        job,
                        attempt,
                    });
                    let this = self.clone();
                    tokio::spawn(async move { this.watch_adopted(dir).await });
                }
                Ok(Liveness::Ended(outcome)) => self.ended(job, attempt, outcome),
                Ok(Liveness::Died) => {
                    let outcome = self.died(
                        &dir,
                        JobState::NodeFail,
                        "the job's shim died while labpool was down (node rebooted?)",
                    );
                    self.ended(job, attempt, outcome);
                }
                Ok(Liveness::NeverStarted) => {
                    self.report(AgentReport::NeverStarted {
                        node: self.node.clone(),
                        job,
                        attempt,
                        why: None,
                    });
                }
                Err(e) => {
                    tracing::error!(job, attempt, "cannot inspect job directory: {e}");
                    let outcome = self.died(
                        &dir,
                        JobState::NodeFail,
                        &format!("its job directory cannot be read: {e}"),
                    );
                    self.ended(job, attempt, outcome);
                }
            }
        }
        // Anything else still running here was ended or requeued while we were away: stop it,
        // so that a job never runs twice.
        for dir in JobDir::list(&self.spool).unwrap_or_default() {
            if expected_set.contains(&(dir.job, dir.attempt)) {
                continue;
            }
            match dir.try_lock() {
                Ok(None) => {
                    if let Some(pid) = dir.shim_pid() {
                        tracing::warn!(
                            job = dir.job,
                            attempt = dir.attempt,
                            "stopping a job the controller no longer expects here"
                        );
                        let _ = signal_shim(pid);
                    }
                }
                Ok(Some(_lock)) => {
                    let _ = dir.remove();
                }
                Err(e) => tracing::warn!(job = dir.job, "cannot inspect stale job directory: {e}"),
            }
        }
    }

    /// Watches an adopted attempt (not this process's child) until its end is recorded.
    async fn watch_adopted(&self, dir: JobDir) {
        self.spawn_step_watch(dir.job, dir.attempt);
        loop {
            tokio::time::sleep(ADOPTED_POLL).await;
            if let Some(outcome) = dir.status() {
                return self.ended(dir.job, dir.attempt, outcome);
            }
            match dir.try_lock() {
                Ok(None) => continue,
                // The lock is free: the shim is gone. Re-read the status it may have written
                // just before exiting.
                Ok(Some(_lock)) => {
                    let outcome = dir.status().unwrap_or_else(|| {
                        self.died(
                            &dir,
                            JobState::NodeFail,
                            "the job's shim died without recording an end",
                        )
                    });
                    return self.ended(dir.job, dir.attempt, outcome);
                }
                Err(e) => {
                    tracing::warn!(job = dir.job, "cannot check job lock: {e}");
                }
            }
        }
    }
}
