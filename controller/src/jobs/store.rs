//! The SQL side of a job's [`Transition`]: one row update and one line of its event log, from
//! the same value the in-memory record is changed with.

use crate::db::{Db, DbError, gpu_column};
use labpool_lifecycle::Transition;
use sqlx::{Sqlite, Transaction};

/// A hold as the `hold` column keeps it: JSON, or NULL when the job is not held.
pub(super) fn hold_column(hold: Option<&labpool_lifecycle::Hold>) -> Option<String> {
    hold.map(|h| serde_json::to_string(h).expect("a hold serialises"))
}

/// A placement's gang nodes and leased ports as their columns keep them: JSON, or NULL.
fn placement_columns(p: &labpool_lifecycle::Placement) -> (Option<String>, Option<String>) {
    let others = (!p.others.is_empty())
        .then(|| serde_json::to_string(&p.others).expect("node shares serialise"));
    let ports = p
        .ports
        .map(|b| serde_json::to_string(&b).expect("a port block serialises"));
    (others, ports)
}

impl Db {
    /// Writes one change of `job`.
    pub async fn persist(
        tx: &mut Transaction<'_, Sqlite>,
        job: u64,
        t: &Transition,
    ) -> Result<(), DbError> {
        let id = job as i64;
        match t {
            Transition::Staging {
                attempt,
                placement: p,
                kind,
                detail,
                ..
            } => {
                let (others, ports) = placement_columns(p);
                sqlx::query(
                    "UPDATE jobs SET state = 'STAGING', reason = ?, reason_detail = ?, node = ?, gpus = ?, attempt = ?, \
                     start_time = NULL, end_time = NULL, exit_code = NULL, signal = NULL, cancel_requested_by = NULL, stdout = ?, stderr = ?, \
                     others = ?, ports = ?, preemption = NULL, part_ended = NULL, pause = NULL WHERE id = ?",
                )
                .bind(kind.reason())
                .bind(detail)
                .bind(&p.node)
                .bind(gpu_column(&p.gpus))
                .bind(*attempt as i64)
                .bind(p.stdout.display().to_string())
                .bind(p.stderr.display().to_string())
                .bind(others)
                .bind(ports)
                .bind(id)
                .execute(&mut **tx)
                .await?;
            }
            Transition::Started {
                attempt,
                placement: p,
                isolation,
                time,
            } => {
                let (others, ports) = placement_columns(p);
                sqlx::query(
                    "UPDATE jobs SET state = 'RUNNING', reason = NULL, reason_detail = NULL, node = ?, gpus = ?, attempt = ?, \
                     start_time = ?, end_time = NULL, exit_code = NULL, signal = NULL, cancel_requested_by = NULL, stdout = ?, stderr = ?, isolation = ?, \
                     others = ?, ports = ?, preemption = NULL, part_ended = NULL, pause = NULL WHERE id = ?",
                )
                .bind(&p.node)
                .bind(gpu_column(&p.gpus))
                .bind(*attempt as i64)
                .bind(time)
                .bind(p.stdout.display().to_string())
                .bind(p.stderr.display().to_string())
                .bind(isolation)
                .bind(others)
                .bind(ports)
                .bind(id)
                .execute(&mut **tx)
                .await?;
            }
            Transition::Waiting { code, detail } => {
                sqlx::query("UPDATE jobs SET reason = ?, reason_detail = ? WHERE id = ?")
                    .bind(code)
                    .bind(detail)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            Transition::Noted { .. } => {}
            Transition::RunningSince { time, .. } => {
                sqlx::query("UPDATE jobs SET start_time = ? WHERE id = ?")
                    .bind(time)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            Transition::Held { hold, .. } => {
                sqlx::query("UPDATE jobs SET hold = ? WHERE id = ?")
                    .bind(hold_column(hold.as_ref()))
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            Transition::RequeueRequested { by, .. } => {
                sqlx::query("UPDATE jobs SET requeue_requested_by = ? WHERE id = ?")
                    .bind(by)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            Transition::PreemptRequested { by, cause, time } => {
                let notice = labpool_lifecycle::Preemption {
                    by: *by,
                    at: *time,
                    cause: cause.clone(),
                };
                sqlx::query(
                    "UPDATE jobs SET requeue_requested_by = ?, preemption = ? WHERE id = ?",
                )
                .bind(labpool_lifecycle::preempt_requester(*by))
                .bind(serde_json::to_string(&notice).expect("a notice serialises"))
                .bind(id)
                .execute(&mut **tx)
                .await?;
            }
            Transition::PartEnded { part, .. } => {
                sqlx::query("UPDATE jobs SET part_ended = ? WHERE id = ?")
                    .bind(serde_json::to_string(part).expect("a part's end serialises"))
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            Transition::CancelRequested { by, .. } => {
                sqlx::query("UPDATE jobs SET cancel_requested_by = ? WHERE id = ?")
                    .bind(by)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
            }
            Transition::Requeued { code, detail, .. } => {
                sqlx::query(
                    "UPDATE jobs SET state = 'PENDING', reason = ?, reason_detail = ?, node = NULL, gpus = '', others = NULL, ports = NULL, start_time = NULL, requeue_requested_by = NULL, pause = NULL WHERE id = ?",
                )
                .bind(code)
                .bind(detail)
                .bind(id)
                .execute(&mut **tx)
                .await?;
            }
            Transition::Suspended { pause } => {
                sqlx::query(
                    "UPDATE jobs SET gpus = '', reason = ?, reason_detail = ?, pause = ? WHERE id = ?",
                )
                .bind(labpool_lifecycle::SUSPENDED)
                .bind(pause.words())
                .bind(serde_json::to_string(pause).expect("a pause serialises"))
                .bind(id)
                .execute(&mut **tx)
                .await?;
            }
            Transition::Resumed { pause, .. } => {
                sqlx::query(
                    "UPDATE jobs SET gpus = ?, reason = NULL, reason_detail = NULL, pause = ? WHERE id = ?",
                )
                .bind(gpu_column(&pause.gpus))
                .bind(serde_json::to_string(pause).expect("a pause serialises"))
                .bind(id)
                .execute(&mut **tx)
                .await?;
            }
            Transition::Ended {
                state,
                exit_code,
                signal,
                detail,
                time,
            } => {
                sqlx::query(
                    "UPDATE jobs SET state = ?, exit_code = ?, signal = ?, end_time = ?, reason = NULL, reason_detail = ? WHERE id = ?",
                )
                .bind(state.as_str())
                .bind(exit_code)
                .bind(signal)
                .bind(time)
                .bind(detail)
                .bind(id)
                .execute(&mut **tx)
                .await?;
            }
        }
        match t.event() {
            Some((event, detail, time)) => Db::event(tx, job, time, event, Some(&detail)).await,
            None => Ok(()),
        }
    }

    /// Adds a line to a job's event log.
    pub(crate) async fn event(
        tx: &mut Transaction<'_, Sqlite>,
        job: u64,
        time: i64,
        event: &str,
        detail: Option<&str>,
    ) -> Result<(), DbError> {
        sqlx::query("INSERT INTO job_events (job_id, time, event, detail) VALUES (?, ?, ?, ?)")
            .bind(job as i64)
            .bind(time)
            .bind(event)
            .bind(detail)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}
