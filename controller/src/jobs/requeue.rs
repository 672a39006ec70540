//! Requeues (`labpool requeue`, `scontrol requeue`): a running job is stopped (TERM, then KILL)
//! and waits again under the same id, as a new attempt charged only for the time it ran.
//! A job submitted with `--no-requeue` is not requeued.

use crate::api::CancelOutcome;
use crate::engine::Engine;
use crate::identity::Caller;
use crate::jobs::cancel::answered;
use labpool_lifecycle::Event;
use labpool_scheduler::JobState;

impl Engine {
    /// Requeues the jobs `names` names, one outcome per name.
    pub(crate) async fn requeue(
        &mut self,
        names: &[String],
        caller: &Caller,
    ) -> anyhow::Result<Vec<CancelOutcome>> {
        let mut out = Vec::new();
        for named in self.each_named(names).await? {
            out.push(match named {
                Ok((name, id)) => answered(&name, self.requeue_one(id, caller).await?),
                Err(refused) => refused,
            });
        }
        Ok(out)
    }

    async fn requeue_one(
        &mut self,
        id: u64,
        caller: &Caller,
    ) -> anyhow::Result<Result<String, String>> {
        let Some(row) = self.jobs.job(id) else {
            return Ok(Err(match self.db.job(id).await? {
                Some(r) => format!("job {id} already ended ({}); submit it again", r.state),
                None => format!("no job {id}"),
            }));
        };
        if let Err(why) = self.owner_or_admin(row, caller, "requeue") {
            return Ok(Err(why));
        }
        if row.request.no_requeue {
            return Ok(Err(format!(
                "job {id} was submitted with --no-requeue; cancel it instead"
            )));
        }
        if row.state != JobState::Running {
            return Ok(Err(format!(
                "job {id} is {}; only a running job can be requeued",
                row.state
            )));
        }
        if row.cancel_requested_by.is_some() || row.requeue_requested_by.is_some() {
            return Ok(Err(format!("job {id} is already being stopped")));
        }
        let grace = labpool_units::format_duration(self.config.controller.kill_grace);
        self.lifecycle(Event::Requeue {
            job: id,
            by: caller.user.clone(),
        });
        Ok(Ok(format!(
            "job {id} is being requeued (TERM, then KILL after {grace}); it then waits again"
        )))
    }
}
