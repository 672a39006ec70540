//! Holds and releases (`labpool hold`, `labpool release`, `scontrol hold|release`): a waiting
//! job is kept from starting until released. Its owner's hold is released by the owner or an
//! admin; an admin's hold on another user's job only by an admin, as Slurm's `JobHeldAdmin`.

use crate::api::CancelOutcome;
use crate::engine::Engine;
use crate::identity::Caller;
use crate::jobs::cancel::outcome;
use labpool_lifecycle::{Event, Hold};
use labpool_scheduler::{HoldBy, JobState};

impl Engine {
    /// Holds (`hold`) or releases the jobs `names` names, one outcome per name.
    pub(crate) async fn hold(
        &mut self,
        names: &[String],
        hold: bool,
        caller: &Caller,
    ) -> anyhow::Result<Vec<CancelOutcome>> {
        let verb = if hold { "held" } else { "released" };
        let mut out = Vec::new();
        for (name, ids) in self.resolve_names(names).await? {
            let reply = |ok: bool, message: String| outcome(&name, ok, message);
            let ids = match ids {
                Ok(ids) => ids,
                Err(refused) => {
                    out.push(refused);
                    continue;
                }
            };
            let mut done = Vec::new();
            let mut refused = Vec::new();
            for id in ids {
                match self.hold_one(id, hold, caller).await? {
                    Ok(()) => done.push(id),
                    Err(why) => refused.push(why),
                }
            }
            if !done.is_empty() {
                let list: Vec<String> = done.iter().map(u64::to_string).collect();
                let what = if done.len() == 1 { "job" } else { "jobs" };
                out.push(reply(true, format!("{what} {} {verb}", list.join(", "))));
            }
            // An array's tasks that already run are not worth a line each.
            if done.is_empty() || refused.len() == 1 {
                out.extend(refused.into_iter().take(1).map(|m| reply(false, m)));
            }
        }
        Ok(out)
    }

    async fn hold_one(
        &mut self,
        id: u64,
        hold: bool,
        caller: &Caller,
    ) -> anyhow::Result<Result<(), String>> {
        let Some(row) = self.jobs.job(id) else {
            return Ok(Err(match self.db.job(id).await? {
                Some(r) => format!("job {id} already ended ({})", r.state),
                None => format!("no job {id}"),
            }));
        };
        if let Err(why) = self.owner_or_admin(row, caller, "hold and release") {
            return Ok(Err(why));
        }
        let own = row.uid == caller.uid;
        if row.state != JobState::Pending {
            let what = if hold { "held" } else { "released" };
            return Ok(Err(format!(
                "job {id} is {}; only a waiting job can be {what}{}",
                row.state,
                if hold {
                    "\nhint: `labpool cancel` stops it, `labpool requeue` puts it back in the queue"
                } else {
                    ""
                }
            )));
        }
        let new = if hold {
            Some(Hold {
                by: caller.user.clone(),
                kind: if own { HoldBy::User } else { HoldBy::Admin },
            })
        } else {
            match &row.hold {
                None => return Ok(Err(format!("job {id} is not held"))),
                Some(h) if h.kind == HoldBy::Admin && !caller.admin => {
                    return Ok(Err(format!(
                        "job {id} was held by the admin {}; only an admin can release it",
                        h.by
                    )));
                }
                Some(_) => None,
            }
        };
        self.lifecycle(Event::Hold {
            job: id,
            hold: new,
            by: caller.user.clone(),
        });
        Ok(Ok(()))
    }
}
