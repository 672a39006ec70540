//! Reservations: GPUs of one node booked ahead for a time window, for named users or an
//! account (a demo, a paper deadline's 48-hour run).
//!
//! A reservation is given its GPUs when it is made: the lowest-numbered GPUs of the first node
//! (in node order, or the one named) that no overlapping reservation holds and that no running
//! job holds past the window's start, going by time limits. So a reservation is never
//! double-booked, and its GPUs are free when it starts. Every other job is then kept off them
//! over the window (a pass books them in each node's profile); jobs may still run there if
//! their time limit ends before it starts. Jobs submitted with `--reservation NAME` run only
//! inside it: on its GPUs, within its window, ending by its end; they are never preempted.

use crate::job::JobSpec;
use crate::scheduler::Scheduler;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A reservation as booked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Its name, unique.
    pub name: String,
    /// When it starts.
    pub start: Timestamp,
    /// When it ends (exclusive).
    pub end: Timestamp,
    /// The node its GPUs are on.
    pub node: String,
    /// The GPUs, by index.
    pub gpus: Vec<u32>,
    /// Users who may run in it; with `account`, members of that account may too.
    pub users: BTreeSet<String>,
    /// An account whose members may run in it.
    pub account: Option<String>,
}

impl Reservation {
    /// The reserved GPUs as a mask.
    pub fn mask(&self) -> u64 {
        self.gpus.iter().fold(0u64, |m, g| m | (1u64 << g))
    }

    /// True when its window and `[start, end)` overlap.
    pub fn overlaps(&self, start: Timestamp, end: Timestamp) -> bool {
        self.start < end && start < self.end
    }
}

/// What an admin asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationRequest {
    /// Its name.
    pub name: String,
    /// When it starts.
    pub start: Timestamp,
    /// How long, seconds.
    pub duration_s: u64,
    /// How many GPUs.
    pub gpus: u32,
    /// On this node only.
    pub node: Option<String>,
    /// Users who may run in it.
    pub users: BTreeSet<String>,
    /// An account whose members may run in it.
    pub account: Option<String>,
}

/// Why a reservation was refused. Every problem of a request is listed at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot reserve: {}", .0.join("; "))]
pub struct ReservationError(pub Vec<String>);

impl Scheduler {
    /// Books a reservation at `now`, choosing its GPUs; nothing changes when it is refused.
    pub fn create_reservation(
        &mut self,
        req: &ReservationRequest,
        now: Timestamp,
    ) -> Result<Reservation, ReservationError> {
        let mut problems = Vec::new();
        let name_ok = !req.name.is_empty()
            && req.name.len() <= 64
            && req
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !name_ok {
            problems.push(format!(
                "name {:?}: use 1 to 64 letters, digits, '-', '_' or '.'",
                req.name
            ));
        }
        if self.reservations.contains_key(&req.name) {
            problems.push(format!(
                "reservation {} exists; delete it first or choose another name",
                req.name
            ));
        }
        if req.duration_s == 0 {
            problems.push("the duration must be more than 0".to_string());
        }
        if req.gpus == 0 {
            problems.push("--gpus must be at least 1".to_string());
        }
        // `--start now` is read by the client a moment before the controller books it.
        if req.start.plus_secs(60) < now {
            problems.push("the start is in the past; give a time from now on".to_string());
        }
        if req.users.is_empty() && req.account.is_none() {
            problems.push("say who may use it: --users U,... or --account A".to_string());
        }
        if let Some(a) = &req.account
            && !self.accounts.contains_key(a)
        {
            let known: Vec<&str> = self.accounts.keys().map(String::as_str).collect();
            problems.push(format!(
                "unknown account {a:?}; accounts: {}",
                known.join(", ")
            ));
        }
        if let Some(n) = &req.node
            && !self.nodes.contains_key(n)
        {
            problems.push(format!(
                "no node {n:?}; nodes: {}",
                self.node_order.join(", ")
            ));
        }
        if !problems.is_empty() {
            return Err(ReservationError(problems));
        }
        let start = req.start.max(now);
        let end = req.start.plus_secs(req.duration_s);
        let mut why_not = Vec::new();
        for name in &self.node_order {
            if req.node.as_ref().is_some_and(|n| n != name) {
                continue;
            }
            let node = &self.nodes[name];
            let mut free: u64 = node
                .spec
                .gpus
                .iter()
                .fold(0u64, |m, g| m | (1u64 << g.index));
            for r in self.reservations.values() {
                if r.node == *name && r.overlaps(start, end) {
                    free &= !r.mask();
                }
            }
            for (job, alloc) in self.running.values() {
                if alloc.start.plus_limit(job.time_limit) > start {
                    for part in alloc.parts().filter(|p| p.node == name) {
                        for g in part.gpus {
                            free &= !(1u64 << g);
                        }
                    }
                }
            }
            if free.count_ones() >= req.gpus {
                let mask = crate::profile::lowest_bits(free, req.gpus);
                let gpus = (0..64).filter(|g| mask & (1u64 << g) != 0).collect();
                let r = Reservation {
                    name: req.name.clone(),
                    start,
                    end,
                    node: name.clone(),
                    gpus,
                    users: req.users.clone(),
                    account: req.account.clone(),
                };
                self.reservations.insert(r.name.clone(), r.clone());
                return Ok(r);
            }
            why_not.push(format!("{name} has {} free then", free.count_ones()));
        }
        Err(ReservationError(vec![format!(
            "no node has {} free for the whole window ({}): running jobs' time limits and other reservations hold them; choose a later start, fewer GPUs, or another node",
            labpool_units::count(u64::from(req.gpus), "GPU"),
            why_not.join(", ")
        )]))
    }

    /// Deletes a reservation; its jobs that wait for it wait for ever (they are told so).
    pub fn delete_reservation(&mut self, name: &str) -> Option<Reservation> {
        self.reservations.remove(name)
    }

    /// Puts back a reservation read from storage, as it was booked.
    pub fn restore_reservation(&mut self, r: Reservation) {
        self.reservations.insert(r.name.clone(), r);
    }

    /// Every reservation, by name.
    pub fn reservations(&self) -> impl Iterator<Item = &Reservation> {
        self.reservations.values()
    }

    /// Drops the reservations that have ended by `now`, returning their names.
    pub fn expire_reservations(&mut self, now: Timestamp) -> Vec<String> {
        let ended: Vec<String> = self
            .reservations
            .values()
            .filter(|r| r.end <= now)
            .map(|r| r.name.clone())
            .collect();
        for n in &ended {
            self.reservations.remove(n);
        }
        ended
    }

    /// True when `job`'s user may run in reservation `r`.
    pub fn may_use(&self, r: &Reservation, job: &JobSpec) -> bool {
        r.users.contains(&job.user)
            || r.account.as_ref().is_some_and(|a| {
                self.accounts
                    .get(a)
                    .is_some_and(|acc| acc.members.contains(&job.user))
            })
    }
}

impl Scheduler {
    /// Why a job may not be submitted into reservation `name`: it does not exist, the user
    /// may not use it, the job spans several nodes, asks for more GPUs than it holds, or
    /// for more time than it lasts. Every problem at once.
    pub fn check_reservation(&self, job: &JobSpec, name: &str) -> Result<(), ReservationError> {
        let Some(r) = self.reservations.get(name) else {
            let known: Vec<&str> = self.reservations.keys().map(String::as_str).collect();
            return Err(ReservationError(vec![format!(
                "no reservation {name:?}; reservations: {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )]));
        };
        let mut problems = Vec::new();
        if !self.may_use(r, job) {
            problems.push(format!(
                "{} may not use reservation {name}; ask an admin to add you",
                job.user
            ));
        }
        if job.resources.node_count() > 1 {
            problems.push(format!(
                "reservation {name} holds GPUs on one node ({}); submit on one node",
                r.node
            ));
        }
        if job.resources.gpus as usize > r.gpus.len() {
            problems.push(format!(
                "the job asks for {} and reservation {name} holds {}",
                labpool_units::count(u64::from(job.resources.gpus), "GPU"),
                r.gpus.len()
            ));
        }
        let window = (r.end.0 - r.start.0).max(0) as u64 / 1000;
        if Timestamp(0).plus_limit(job.time_limit) > Timestamp(0).plus_secs(window) {
            problems.push(format!(
                "its time limit ({}) is longer than reservation {name} ({}); give --time {} or less",
                job.time_limit,
                labpool_units::format_elapsed(window),
                labpool_units::format_elapsed(window)
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ReservationError(problems))
        }
    }
}
