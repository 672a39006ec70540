//! Signals to running jobs (`labpool cancel --signal`, `scancel --signal`): the node sends the
//! signal to the job's steps, its batch shell, or both; the job goes on running, and what it
//! does with the signal is its own affair (a checkpoint, a log rotation).

use crate::api::agent::AgentOrder;
use crate::api::{CancelOutcome, SignalRequest, SignalTarget};
use crate::engine::Engine;
use crate::identity::Caller;
use crate::jobs::cancel::answered;
use labpool_scheduler::JobState;

impl Engine {
    /// Sends the signal to each job `req` names that runs; one outcome per job.
    pub(crate) async fn signal(
        &mut self,
        req: &SignalRequest,
        caller: &Caller,
    ) -> anyhow::Result<Vec<CancelOutcome>> {
        let name = nix::sys::signal::Signal::try_from(req.signal)
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|_| req.signal.to_string());
        let whom = match req.target {
            SignalTarget::Steps => "its steps' tasks (not its batch shell or srun)",
            SignalTarget::Batch => "its batch shell",
            SignalTarget::All => "all its processes",
        };
        let mut out = Vec::new();
        for named in self.each_named(&req.ids).await? {
            out.push(match named {
                Ok((id_name, id)) => {
                    answered(&id_name, self.signal_one(id, req, caller, &name, whom))
                }
                Err(refused) => refused,
            });
        }
        Ok(out)
    }

    /// Sends the signal to job `id` on every node it runs on; what was done, or why not.
    fn signal_one(
        &mut self,
        id: u64,
        req: &SignalRequest,
        caller: &Caller,
        name: &str,
        whom: &str,
    ) -> Result<String, String> {
        let row = self
            .jobs
            .job(id)
            .ok_or_else(|| format!("job {id} is not running"))?;
        self.owner_or_admin(row, caller, "signal")?;
        if row.state != JobState::Running {
            return Err(format!(
                "job {id} is {}; only a running job can be signalled",
                row.state
            ));
        }
        // A multi-node job is signalled on every node it runs on.
        let (nodes, attempt) = (row.nodes(), row.attempt);
        for node in &nodes {
            let order = AgentOrder::Signal {
                job: id,
                attempt,
                signal: req.signal,
                target: req.target,
            };
            self.outbox.order(node, order);
        }
        Ok(format!(
            "job {id}: {name} sent to {whom} on {}",
            nodes.join(",")
        ))
    }
}
