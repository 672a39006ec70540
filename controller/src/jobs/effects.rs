//! The shell around the lifecycle core: it feeds events to [`labpool_lifecycle::Lifecycle`],
//! applies their effects to the scheduler and the ledger at once, and keeps what must be
//! written or sent in an [`Outbox`]. At the end of each batch the outbox is written in one
//! transaction (the one the batch's submits inserted their jobs in), then its orders go to the
//! nodes and its replies to the callers: nothing is acted on or promised before it is on disk.

use crate::api::Submitted;
use crate::api::agent::AgentOrder;
use crate::clock::now_ms;
use crate::db::Db;
use crate::engine::Engine;
use labpool_lifecycle::{Effect, Event, StageKind, Transition};
use labpool_scheduler::credits::Entry;
use labpool_scheduler::scheduler::Settlement;
use labpool_scheduler::{JobId, Timestamp};
use std::collections::BTreeMap;

/// An order waiting for the batch's commit.
enum Order {
    /// A message on a node's link.
    Send(String, AgentOrder),
    /// The stage of an attempt's datasets or environment.
    Stage {
        job: u64,
        attempt: u32,
        node: String,
        kind: StageKind,
    },
}

/// What a batch must write, then send, then answer.
#[derive(Default)]
pub struct Outbox {
    persist: Vec<(u64, Transition)>,
    job_datasets: Vec<(u64, Vec<(String, String)>)>,
    steps: Vec<(u64, u32, Vec<crate::api::steps::StepRecord>)>,
    spec_updates: Vec<super::update::SpecUpdate>,
    ledger: Vec<Entry>,
    orders: Vec<Order>,
    replies: Vec<Box<dyn FnOnce() + Send + Sync>>,
    /// Submit keys taken in this batch, not yet committed.
    keys: BTreeMap<(u32, String), Submitted>,
}

impl Outbox {
    /// A reply to send once the batch is on disk.
    pub fn reply<T: Send + Sync + 'static>(
        &mut self,
        to: tokio::sync::oneshot::Sender<T>,
        value: T,
    ) {
        self.replies.push(Box::new(move || {
            let _ = to.send(value);
        }));
    }

    /// The answer a submit with this key got earlier in the batch.
    pub fn submit_key(&self, uid: u32, key: &str) -> Option<Submitted> {
        self.keys.get(&(uid, key.to_string())).cloned()
    }

    /// A submit key taken in this batch.
    pub fn taken_key(&mut self, uid: u32, key: String, submitted: Submitted) {
        self.keys.insert((uid, key), submitted);
    }

    /// Ledger entries (charges, grants) to write with the batch.
    pub fn ledger(&mut self, entries: impl IntoIterator<Item = Entry>) {
        self.ledger.extend(entries);
    }

    /// A change decided outside the lifecycle's events (a job lost across a restart).
    pub fn persist(&mut self, job: u64, t: Transition) {
        self.persist.push((job, t));
    }

    /// The dataset versions an attempt was given, written with the batch.
    pub fn job_datasets(&mut self, job: u64, versions: Vec<(String, String)>) {
        self.job_datasets.push((job, versions));
    }

    /// The `srun` steps of an attempt that ended, written with the batch.
    pub fn steps(&mut self, job: u64, attempt: u32, steps: Vec<crate::api::steps::StepRecord>) {
        if !steps.is_empty() {
            self.steps.push((job, attempt, steps));
        }
    }

    /// A waiting job's new spec, written with the batch.
    pub fn spec_update(&mut self, u: super::update::SpecUpdate) {
        self.spec_updates.push(u);
    }

    /// The stage of an attempt's datasets or environment, sent after the batch's commit.
    pub fn stage(&mut self, job: u64, attempt: u32, node: &str, kind: StageKind) {
        self.orders.push(Order::Stage {
            job,
            attempt,
            node: node.to_string(),
            kind,
        });
    }

    /// An order for `node`, sent after the batch's commit.
    pub fn order(&mut self, node: &str, order: AgentOrder) {
        self.orders.push(Order::Send(node.to_string(), order));
    }
}

impl Engine {
    /// Feeds one event to the lifecycle, at the real clock's now.
    pub(crate) fn lifecycle(&mut self, event: Event) {
        let effects = self.jobs.handle(event, self.clock.now_ms());
        self.apply(effects);
    }

    /// Applies effects in memory; writes and orders wait in the outbox.
    pub(crate) fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            if matches!(
                effect,
                Effect::Release { .. }
                    | Effect::Requeue { .. }
                    | Effect::Dequeue { .. }
                    | Effect::HoldChanged { .. }
                    | Effect::Suspend { .. }
            ) {
                // Capacity or the queue changed.
                self.pass_need = crate::engine::PassNeed::Full;
            }
            match effect {
                Effect::Persist { job, transition } => self.outbox.persist.push((job, transition)),
                Effect::Launch {
                    job,
                    attempt,
                    node,
                    staged,
                } => self.order_launch(job, attempt, &node, staged),
                Effect::Stage {
                    job,
                    attempt,
                    node,
                    kind,
                } => self.outbox.orders.push(Order::Stage {
                    job,
                    attempt,
                    node,
                    kind,
                }),
                Effect::Kill { job, attempt, node } => {
                    self.outbox.order(&node, AgentOrder::Kill { job, attempt })
                }
                Effect::Notice {
                    job,
                    attempt,
                    node,
                    by,
                } => {
                    let signal = self.jobs.job(job).and_then(|r| r.request.signal);
                    let grace_ms = self.config.preemption.grace.as_millis() as u64;
                    let order = AgentOrder::Notice {
                        job,
                        attempt,
                        by,
                        signal,
                        grace_ms,
                    };
                    self.outbox.order(&node, order)
                }
                Effect::Suspend { job } => {
                    let now = labpool_scheduler::Timestamp(self.clock.now_ms());
                    if let Err(e) = self.sched.suspend(JobId(job), now) {
                        // The lifecycle took it, the scheduler did not: it cannot come back,
                        // so it is stopped rather than left without a way back.
                        tracing::error!(
                            job,
                            "the scheduler could not free a suspended job's GPUs: {e}"
                        );
                        self.lifecycle(Event::Cancel {
                            job,
                            by: "labpool".to_string(),
                        });
                    }
                }
                Effect::Restore {
                    job,
                    attempt,
                    node,
                    gpus,
                } => {
                    self.resuming.insert(job, self.clock.now_ms());
                    self.outbox
                        .order(&node, AgentOrder::Resume { job, attempt, gpus })
                }
                Effect::Forget { job, attempt, node } => self
                    .outbox
                    .order(&node, AgentOrder::Forget { job, attempt }),
                Effect::Adopt { node, expected } => {
                    self.outbox.order(&node, AgentOrder::Adopt { expected })
                }
                Effect::Dequeue { job } => {
                    self.sched.remove_pending(JobId(job));
                    self.jobs.remove(job);
                }
                Effect::Requeue { job, charged } => {
                    if charged {
                        self.charge_requeued(job);
                    }
                    self.sched.requeue(JobId(job));
                    self.data.job_versions.remove(&job);
                    self.forget_env_stages(job);
                }
                Effect::Release { job, was_staging } => self.release(job, was_staging),
                Effect::HoldChanged { job, hold } => {
                    self.sched.set_hold(JobId(job), hold);
                }
                Effect::Ignored {
                    job,
                    attempt,
                    node,
                    why,
                } => tracing::warn!(job, attempt, node, "report ignored: {}", why.describe()),
            }
        }
    }

    /// Writes the batch in one transaction, then sends its orders and replies.
    pub(crate) async fn flush(&mut self) -> anyhow::Result<()> {
        let outbox = std::mem::take(&mut self.outbox);
        let open = self.batch_tx.take();
        if open.is_some()
            || !(outbox.persist.is_empty()
                && outbox.ledger.is_empty()
                && outbox.job_datasets.is_empty()
                && outbox.steps.is_empty()
                && outbox.spec_updates.is_empty())
        {
            let mut tx = match open {
                Some(tx) => tx,
                None => self.db.begin().await?,
            };
            for (job, versions) in &outbox.job_datasets {
                Db::set_job_datasets(&mut tx, *job, versions).await?;
            }
            for (job, t) in &outbox.persist {
                Db::persist(&mut tx, *job, t).await?;
            }
            for u in &outbox.spec_updates {
                Db::update_spec(&mut tx, u).await?;
            }
            for (job, attempt, steps) in &outbox.steps {
                Db::insert_steps(&mut tx, *job, *attempt, steps).await?;
            }
            for e in &outbox.ledger {
                Db::append_ledger(&mut tx, e).await?;
            }
            tx.commit().await?;
            if !outbox.keys.is_empty()
                && std::env::var(crate::env_vars::LABPOOL_TEST_CRASH_AFTER_SUBMIT).as_deref()
                    == Ok("1")
            {
                tracing::error!("test hook: aborting after committing a submit, before answering");
                std::process::abort();
            }
        }
        for order in outbox.orders {
            match order {
                Order::Send(node, order) => {
                    let Some(order) = self.to_gate(&node, order) else {
                        continue;
                    };
                    match self.reach.orders(&node) {
                        Some(link) => {
                            let _ = link.send(order);
                        }
                        None => tracing::debug!(node, "no link to the node; order dropped"),
                    }
                }
                Order::Stage {
                    job,
                    attempt,
                    node,
                    kind: StageKind::Data,
                } => self.start_staging(job, attempt, &node),
                Order::Stage {
                    job,
                    attempt,
                    node,
                    kind: StageKind::Env,
                } => self.send_env_stage(job, attempt, &node),
            }
        }
        for reply in outbox.replies {
            reply();
        }
        Ok(())
    }

    /// The start order of a running attempt.
    fn order_launch(&mut self, job: u64, attempt: u32, node: &str, staged: bool) {
        if staged {
            self.sched
                .set_started(JobId(job), Timestamp(self.clock.now_ms()));
        }
        let alloc = self
            .sched
            .running()
            .find(|(j, _)| j.id.0 == job)
            .map(|(_, a)| a.clone());
        let (Some(row), Some(alloc)) = (self.jobs.job(job), alloc) else {
            tracing::error!(job, attempt, node, "a launched job holds no allocation");
            return;
        };
        let stdout = row.stdout.clone().unwrap_or_default();
        let stderr = row.stderr.clone().unwrap_or_default();
        let (node, launch) = self.launch(row, &alloc, stdout, stderr, !staged);
        for (node, launch) in self.gang_launches(node, launch, &alloc) {
            self.outbox
                .order(&node, AgentOrder::Start(Box::new(launch)));
        }
    }

    /// A requeued attempt that ran is charged for the time it held its GPUs, as an end is.
    fn charge_requeued(&mut self, job: u64) {
        let Some((spec, alloc)) = self
            .sched
            .running()
            .find(|(j, _)| j.id == JobId(job))
            .map(|(j, a)| (j.clone(), a.clone()))
        else {
            return;
        };
        let end = Timestamp(self.clock.now_ms());
        let entries = self.sched.settle(&spec, &alloc, end, Settlement::Requeued);
        tracing::debug!(job, ?entries, "a requeued attempt is charged");
        if entries.is_empty() {
            return;
        }
        self.ledger.record(entries.iter().cloned());
        self.outbox.ledger(entries);
        self.refresh_balance(&spec.user);
    }

    /// An ended job lets go of its GPUs and is charged for the time it held them.
    fn release(&mut self, job: u64, was_staging: bool) {
        self.forget_env_stages(job);
        self.suspending.remove(&job);
        self.resuming.remove(&job);
        self.data.job_versions.remove(&job);
        let Some(row) = self.jobs.remove(job) else {
            return;
        };
        let end = Timestamp(row.end_time.unwrap_or_else(now_ms));
        if was_staging {
            self.sched.set_started(JobId(job), end);
        }
        let user = row.spec.user.clone();
        let finished = self.sched.finish(JobId(job), row.state, end);
        // The attempt's mean GPU utilisation, as the monitor summed it from the node's
        // samples (none where NVML never sampled it: no rebate).
        let gpu_util = self
            .gpu_util
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(job, row.attempt))
            .map(|percent| percent / 100.0);
        let entries = finished.as_ref().map_or_else(Vec::new, |(spec, alloc)| {
            self.sched
                .settle(spec, alloc, end, Settlement::Ended { gpu_util })
        });
        if let Some(node) = &row.node {
            // Its versions may go now: waiting jobs may fit.
            self.data.unblock(node);
        }
        self.ledger.record(entries.iter().cloned());
        self.outbox.ledger(entries);
        self.refresh_balance(&user);
        tracing::info!(job, state = %row.state, exit_code = ?row.exit_code, "job ended");
    }
}
