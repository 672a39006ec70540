//! Cancels: the names a cancel gives (`12`, `12_3`) resolved to jobs, each checked against the
//! caller and handed to the lifecycle.

use crate::api::CancelOutcome;
use crate::engine::Engine;
use crate::identity::Caller;
use labpool_lifecycle::Event;
use labpool_scheduler::JobState;

impl Engine {
    /// The jobs a cancel (or hold) names: `N` (a job, or every task of array N) or `A_T` (one task).
    pub(crate) async fn resolve_ids(&self, name: &str) -> anyhow::Result<Result<Vec<u64>, String>> {
        if let Some((a, t)) = name.split_once('_') {
            let (Ok(a), Ok(t)) = (a.parse::<u64>(), t.parse::<u32>()) else {
                return Ok(Err(format!(
                    "'{name}' is not a job id (N, or ARRAY_TASK such as 12_3)"
                )));
            };
            return Ok(
                match self
                    .db
                    .array_tasks(a)
                    .await?
                    .into_iter()
                    .find(|(_, task)| *task == t)
                {
                    Some((id, _)) => Ok(vec![id]),
                    None => Err(format!("no task {t} in array {a}")),
                },
            );
        }
        let Ok(id) = name.parse::<u64>() else {
            return Ok(Err(format!(
                "'{name}' is not a job id (N, or ARRAY_TASK such as 12_3)"
            )));
        };
        let tasks = self.db.array_tasks(id).await?;
        Ok(Ok(if tasks.is_empty() {
            vec![id]
        } else {
            tasks.into_iter().map(|(j, _)| j).collect()
        }))
    }

    /// Each name with the jobs it names, or the answer that says why it names none.
    pub(crate) async fn resolve_names(
        &self,
        names: &[String],
    ) -> anyhow::Result<Vec<(String, Result<Vec<u64>, CancelOutcome>)>> {
        let mut out = Vec::new();
        for name in names {
            let ids = self
                .resolve_ids(name)
                .await?
                .map_err(|message| outcome(name, false, message));
            out.push((name.clone(), ids));
        }
        Ok(out)
    }

    /// The jobs `names` name, one by one with the name that named each, or the answer for a
    /// name that names none: what an action taken job by job walks.
    pub(crate) async fn each_named(
        &self,
        names: &[String],
    ) -> anyhow::Result<Vec<Result<(String, u64), CancelOutcome>>> {
        let mut out = Vec::new();
        for (name, ids) in self.resolve_names(names).await? {
            match ids {
                Ok(ids) => out.extend(ids.into_iter().map(|id| Ok((name.clone(), id)))),
                Err(refused) => out.push(Err(refused)),
            }
        }
        Ok(out)
    }

    pub(crate) async fn cancel(
        &mut self,
        names: &[String],
        caller: &Caller,
    ) -> anyhow::Result<Vec<CancelOutcome>> {
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
            let array = ids.len() > 1;
            let mut done = Vec::new();
            for id in ids {
                let Some(row) = self.jobs.job(id) else {
                    if !array {
                        let message = match self.db.job(id).await? {
                            Some(r) => format!("job {id} already ended ({})", r.state),
                            None => format!("no job {id}"),
                        };
                        out.push(reply(false, message));
                    }
                    continue;
                };
                if let Err(why) = self.owner_or_admin(row, caller, "cancel") {
                    out.push(reply(false, why));
                    break;
                }
                done.push(match row.state {
                    JobState::Pending => format!("job {id} cancelled"),
                    // Nothing runs yet: it ends now, uncharged. Its stage may finish, for the
                    // jobs that come after it.
                    JobState::Staging => {
                        format!("job {id} cancelled while its data or environment was staged")
                    }
                    _ => {
                        let grace =
                            labpool_units::format_duration(self.config.controller.kill_grace);
                        format!("job {id} is being stopped (TERM, then KILL after {grace})")
                    }
                });
                // The kill is sent once the request is on disk: a controller that dies now
                // still stops the job after its restart.
                self.lifecycle(Event::Cancel {
                    job: id,
                    by: caller.user.clone(),
                });
            }
            if array {
                if done.is_empty() && !out.iter().any(|o| o.id == name) {
                    out.push(reply(
                        false,
                        format!("array {name} has no tasks left to cancel"),
                    ));
                } else if !done.is_empty() {
                    out.push(reply(true, format!("array {name}: {}", done.join("; "))));
                }
            } else if let Some(message) = done.pop() {
                out.push(reply(true, message));
            }
        }
        Ok(out)
    }
}

/// One name's answer in a cancel, hold, release or requeue.
pub(crate) fn outcome(name: &str, ok: bool, message: String) -> CancelOutcome {
    CancelOutcome {
        id: name.to_string(),
        ok,
        message,
    }
}

/// The outcome for `name` of an action on one of its jobs: done, with what was done, or not,
/// with why.
pub(crate) fn answered(name: &str, answer: Result<String, String>) -> CancelOutcome {
    match answer {
        Ok(m) => outcome(name, true, m),
        Err(m) => outcome(name, false, m),
    }
}
