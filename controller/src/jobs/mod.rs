//! Jobs in the controller: the checks a submit passes ([`checks`]), submits ([`submit`]), cancels ([`cancel`]), holds ([`hold`]), requeues ([`requeue`]), signals ([`signal`]), `srun` steps ([`steps`]), `--test-only` ([`test_only`]), updates ([`update`]), where a running session answers ([`sessions`]), tunnels to a job's ports ([`forward`]), the launch of an attempt
//! ([`launch`]), the shell around the lifecycle core ([`effects`]), the job rows ([`rows`]) and
//! the SQL side of their transitions ([`store`]).

pub mod advice;
pub mod cancel;
pub mod checks;
pub mod effects;
pub mod fields;
pub mod forward;
pub mod hold;
pub mod launch;
pub mod requeue;
pub mod rows;
pub mod sessions;
pub mod signal;
pub mod steps;
pub mod store;
pub mod submit;
pub mod submit_keys;
pub mod suspend;
pub mod test_only;
pub mod update;

pub use effects::Outbox;
pub use rows::{JobEvent, JobRow, NewJob};

impl crate::engine::Engine {
    /// Members act on their own jobs, admins on every job: why `caller` may not `what` the
    /// job in `row` (`"cancel"`, `"hold and release"`, …), or `Ok` when they may.
    pub(crate) fn owner_or_admin(
        &self,
        row: &JobRow,
        caller: &crate::identity::Caller,
        what: &str,
    ) -> Result<(), String> {
        if row.uid == caller.uid || caller.admin {
            return Ok(());
        }
        Err(format!(
            "job {} belongs to {}; you ({}) may {what} only your own jobs (admins: root and group {})",
            row.id, row.spec.user, caller.user, self.config.controller.admin_group
        ))
    }
}

/// Job `id` as its owner or an admin asks for it (sessions, notebooks, a job's ports): 404 with
/// `listed` as the hint when there is no such job, 403 naming its owner and what `caller` `may`
/// ("may open only your own notebooks") otherwise.
pub(crate) async fn owned_job(
    state: &crate::http::AppState,
    caller: &crate::identity::Caller,
    id: u64,
    may: &str,
    listed: Option<&str>,
) -> Result<JobRow, crate::error::ApiError> {
    let row = state.db.job(id).await?.ok_or_else(|| {
        crate::error::ApiError::not_found(format!("no job {id}"), listed.map(str::to_string))
    })?;
    if row.uid != caller.uid && !caller.admin {
        return Err(crate::error::ApiError::forbidden(
            format!(
                "job {id} is {}'s; you ({}) {may}",
                row.spec.user, caller.user
            ),
            None,
        ));
    }
    Ok(row)
}

/// A job id from a path, or a 400 that quotes it.
pub(crate) fn job_id(text: &str) -> Result<u64, crate::error::ApiError> {
    text.parse()
        .map_err(|_| crate::error::ApiError::bad_request(format!("'{text}' is not a job id"), None))
}
