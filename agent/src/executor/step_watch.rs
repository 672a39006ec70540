//! The `srun` steps of a running attempt, reported as they start and end, so that `sacct` and
//! `labpool show` list a running step while its job runs, as Slurm's accounting does.

use super::Executor;
use crate::api::agent::AgentReport;
use crate::api::steps::STEP_POLL;
use crate::jobdir::JobDir;

impl Executor {
    /// Every [`STEP_POLL`] until the attempt's end is reported: when its steps file changed,
    /// reports all of its steps. One `lstat` a poll while nothing changes.
    pub(super) async fn watch_steps(&self, job: u64, attempt: u32) {
        let dir = JobDir::new(&self.spool, job, attempt);
        let mut seen = None;
        loop {
            tokio::time::sleep(STEP_POLL).await;
            let over = self
                .reported
                .lock()
                .expect("not poisoned")
                .contains_key(&(job, attempt));
            if over {
                return;
            }
            let stamp = dir.steps_stamp();
            if stamp.is_none() || stamp == seen {
                continue;
            }
            seen = stamp;
            let steps = dir.steps();
            if !steps.is_empty() {
                self.report(AgentReport::Steps {
                    node: self.node.clone(),
                    job,
                    attempt,
                    steps,
                });
            }
        }
    }

    /// Starts [`Executor::watch_steps`] for an attempt that runs.
    pub(super) fn spawn_step_watch(&self, job: u64, attempt: u32) {
        let this = self.clone();
        tokio::spawn(async move { this.watch_steps(job, attempt).await });
    }
}
