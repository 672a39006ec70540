//! The engine after a (re)start: accounts, limits, usage and unfinished jobs reloaded from the
//! database, and the month whose credits are current.

use crate::clock::month_of;
use crate::engine::Engine;
use labpool_lifecycle::Event;
use labpool_lifecycle::rules::{self, Recovery};
use labpool_scheduler::{Allocation, JobId, JobState, Timestamp};
use std::collections::BTreeSet;

impl Engine {
    /// Reloads state after a (re)start: accounts and limits, this month's credits, recent usage
    /// for fair-share, and unfinished jobs. Waiting jobs wait again, and running ones hold their
    /// GPUs while their nodes are asked to re-adopt them.
    pub async fn restore(&mut self) -> anyhow::Result<()> {
        for (name, description, limits, members) in self.db.accounts().await? {
            self.descriptions.insert(name.clone(), description);
            let members = members.into_iter().collect();
            self.sched.set_account(
                &name,
                labpool_scheduler::policy::Account { members, limits },
            );
        }
        for (user, limits) in self.db.user_limits().await? {
            self.sched.set_user_limits(&user, limits);
        }
        // Fair-share and run-time learning from recent history.
        let w = &self.config.policy().weights;
        let since = self.clock.now_ms() - (4 * w.half_life_s as i64).saturating_mul(1000);
        for row in self
            .db
            .finished_jobs(None, Some(since), None, None, 1_000_000)
            .await?
            .iter()
            .rev()
        {
            if let (Some(start), Some(end)) = (row.start_time, row.end_time) {
                let node = row.node.as_deref().unwrap_or_default();
                // A job that was suspended held its GPUs for less than it ran, and one that
                // ended suspended has them in its pause, not in its record.
                let (gpus, paused) = match &row.pause {
                    Some(p) => (
                        &p.gpus,
                        p.paused_ms + p.since.map_or(0, |since| (end - since).max(0)),
                    ),
                    None => (&row.gpus, 0),
                };
                let milli = self.sched.ran_milli(&row.spec.resources, node, gpus);
                let held_ms = (end - start - paused).max(0);
                let gpu_seconds = f64::from(milli) / 1000.0 * (held_ms / 1000) as f64;
                self.sched
                    .record_usage(&row.spec.user, gpu_seconds, Timestamp(end));
                if row.state == JobState::Completed {
                    self.sched.learn_runtime(&row.spec, end - start);
                }
            }
        }
        self.load_month(self.clock.now_ms()).await?;
        self.restore_remote().await?;
        self.restore_agentless().await?;
        self.db.forget_submit_keys(self.clock.now_ms()).await?;

        let rows = self.db.active_jobs(None).await?;
        for row in rows {
            if let Recovery::Queue = rules::recover(&row.life) {
                self.sched.enqueue(row.spec.clone());
            } else {
                // A job suspended before holds no GPU, and its charge leaves out the time it
                // spent suspended.
                let paused_ms = row.pause.as_ref().map_or(0, |p| p.paused_ms);
                let alloc = Allocation {
                    start: Timestamp(row.start_time.unwrap_or(row.spec.submit_time.0) + paused_ms),
                    node: row.node.clone().unwrap_or_default(),
                    gpus: row.gpus.clone(),
                    cpus: row.spec.resources.cpus,
                    mem_mib: row.spec.resources.mem_mib,
                    shared: row.spec.resources.shares_gpus() && !row.gpus.is_empty(),
                    // The scheduler works the units out from the job and its GPUs.
                    units: 1,
                    others: row.others.clone(),
                    ports: row.ports,
                };
                if let Err(e) = self.sched.restore_running(row.spec.clone(), alloc) {
                    // Its node or GPUs are gone from the configuration: it cannot be re-adopted,
                    // and the lifecycle ends it (the scheduler, which never held it, learns the
                    // outcome for the jobs that depend on it).
                    tracing::error!("{e}");
                    let job = row.id;
                    self.jobs.admit(job, row);
                    let why = e.to_string();
                    self.lifecycle(Event::Unrestorable { job, why });
                    self.sched.note_outcome(JobId(job), false);
                    continue;
                }
            }
            if let Some(pause) = &row.pause
                && let Some(since) = pause.since
            {
                let suspension = labpool_scheduler::Suspension {
                    gpus: pause.gpus.clone(),
                    since: Timestamp(since),
                    wanted: false,
                };
                self.sched.restore_suspension(JobId(row.id), suspension);
            }
            if let Some(p) = &row.preemption {
                let (job, by) = (JobId(row.id), JobId(p.by));
                if row.state == JobState::Pending {
                    self.sched.restore_yielding(job, by);
                } else {
                    let notice = labpool_scheduler::preempt::Notice {
                        by,
                        at: Timestamp(p.at),
                        cause: p.cause.clone(),
                    };
                    self.sched.restore_notice(job, notice);
                }
            }
            self.jobs.admit(row.id, row);
        }
        // Dependencies on jobs that ended before this start.
        let targets: BTreeSet<u64> = self
            .jobs
            .jobs()
            .flat_map(|(_, r)| r.spec.dependencies.iter().map(|d| d.job.0))
            .filter(|id| !self.jobs.contains(*id))
            .collect();
        for id in targets {
            if let Some(state) = self.db.job_state(id).await? {
                self.sched
                    .note_outcome(JobId(id), state == JobState::Completed);
            }
        }
        self.restore_reservations().await?;
        for (node, reason) in self.db.drained_nodes().await? {
            self.sched.set_node_drain(&node, Some(reason));
        }
        self.restore_data().await?;
        let (pending, running) = (self.sched.pending().count(), self.sched.running().count());
        tracing::info!(pending, running, "state restored");
        // Each node keeps the attempts expected there and kills any other; cancels asked for
        // before the restart are carried out now.
        let recovery = self.jobs.recover(self.reach.agent_nodes());
        self.apply(recovery);
        self.flush().await
    }

    /// Loads the month that holds `at`: its ledger entries, and every known user's balance.
    pub(super) async fn load_month(&mut self, at: i64) -> anyhow::Result<()> {
        let (start, end, _, _) = month_of(at);
        // Everyone starts the month from the grant; last month's balances must not linger.
        self.sched.clear_balances();
        let entries = self.db.ledger(None, start).await?;
        self.ledger.begin(start, end, entries);
        let users: BTreeSet<String> = self
            .ledger
            .users()
            .map(str::to_string)
            .chain(self.jobs.jobs().map(|(_, r)| r.spec.user.clone()))
            .chain(self.sched.pending().map(|j| j.user.clone()))
            .collect();
        for user in users {
            self.refresh_balance(&user);
        }
        Ok(())
    }
}
