//! Reservations in the controller: booking (admins), listing, deleting, reloading after a
//! restart, and dropping those that have ended. The booking rules are the scheduler's
//! ([`labpool_scheduler::reservation`]).

pub mod db;
pub mod http;

use crate::api::reservations::{ReservationChange, ReservationView};
use crate::engine::{Engine, PassNeed};
use crate::error::ApiError;
use crate::http::admin_only;
use crate::identity::Caller;
use labpool_scheduler::Timestamp;
use labpool_scheduler::reservation::ReservationRequest;

impl Engine {
    /// Lists, books or deletes reservations; answers with the list afterwards.
    pub(crate) async fn reservation(
        &mut self,
        change: ReservationChange,
        caller: &Caller,
    ) -> anyhow::Result<Result<Vec<ReservationView>, ApiError>> {
        let now = self.clock.now_ms();
        match change {
            ReservationChange::List => {}
            ReservationChange::Create(c) => {
                if let Err(e) = admin_only(&self.config, caller, "book reservations") {
                    return Ok(Err(e));
                }
                let req = ReservationRequest {
                    name: c.name,
                    start: Timestamp(c.start_ms),
                    duration_s: c.duration_s,
                    gpus: c.gpus,
                    node: c.node,
                    users: c.users.into_iter().collect(),
                    account: c.account,
                };
                match self.sched.create_reservation(&req, Timestamp(now)) {
                    Ok(r) => {
                        self.db.add_reservation(&r, &caller.user, now).await?;
                        tracing::info!(name = %r.name, node = %r.node, gpus = ?r.gpus, by = %caller.user, "reservation booked");
                        self.pass_need = PassNeed::Full;
                    }
                    Err(e) => {
                        return Ok(Err(ApiError::bad_request(
                            e.to_string(),
                            Some("`labpool reservation list` and `labpool nodes` show what is booked and held".into()),
                        )));
                    }
                }
            }
            ReservationChange::Delete { name } => {
                if let Err(e) = admin_only(&self.config, caller, "delete reservations") {
                    return Ok(Err(e));
                }
                if self.sched.delete_reservation(&name).is_none() {
                    return Ok(Err(ApiError::not_found(
                        format!("no reservation {name:?}"),
                        Some("`labpool reservation list` shows them".into()),
                    )));
                }
                self.db
                    .delete_reservations(std::slice::from_ref(&name))
                    .await?;
                tracing::info!(%name, by = %caller.user, "reservation deleted");
                self.pass_need = PassNeed::Full;
            }
        }
        Ok(Ok(self.reservation_views(now)))
    }

    /// Every reservation, with the jobs running in it.
    pub(crate) fn reservation_views(&self, now: i64) -> Vec<ReservationView> {
        self.sched
            .reservations()
            .map(|r| ReservationView {
                name: r.name.clone(),
                state: if r.start.0 <= now {
                    "active"
                } else {
                    "upcoming"
                }
                .to_string(),
                start: crate::clock::rfc3339(r.start.0),
                end: crate::clock::rfc3339(r.end.0),
                node: r.node.clone(),
                gpus: r.gpus.clone(),
                users: r.users.iter().cloned().collect(),
                account: r.account.clone(),
                jobs: self
                    .sched
                    .running()
                    .filter(|(j, _)| j.reservation.as_deref() == Some(r.name.as_str()))
                    .map(|(j, _)| j.id.0)
                    .collect(),
            })
            .collect()
    }

    /// Reloads the bookings after a (re)start.
    pub(crate) async fn restore_reservations(&mut self) -> anyhow::Result<()> {
        for r in self.db.reservations().await? {
            self.sched.restore_reservation(r);
        }
        Ok(())
    }

    /// Drops the reservations that have ended, in memory and on disk.
    pub(crate) async fn expire_reservations(&mut self) -> anyhow::Result<()> {
        let ended = self
            .sched
            .expire_reservations(Timestamp(self.clock.now_ms()));
        if !ended.is_empty() {
            tracing::info!(?ended, "reservations ended");
            self.db.delete_reservations(&ended).await?;
            self.pass_need = PassNeed::Full;
        }
        Ok(())
    }
}
