//! The controller's engine: the one task that owns the scheduler and changes state. API
//! handlers and agents send it messages; it commits each change to the database, then acts
//! (orders to agents, replies to callers). Messages that arrive together are handled as one
//! batch, followed by one scheduling pass.
//!
//! This file holds the engine's state, its loop and the dispatch of each message. The work is
//! done in the domain folders: [`crate::jobs`], [`crate::nodes`],
//! [`crate::datasets`] and [`crate::accounts`].

pub(crate) mod answers;
pub mod pass;
pub mod reload;
pub mod request;
pub mod restore;

pub use request::Request;

use crate::api::agent::{AgentOrder, AgentReport};
use crate::clock::Clock;
use crate::datasets::DataState;
use crate::db::Db;
use crate::identity::effective_uid;
use crate::jobs::JobRow;
use crate::jobs::Outbox;
use crate::settings::Config;
use crate::storage::{self, StorageGate};
use labpool_lifecycle::{Event, Lifecycle};
use labpool_scheduler::{JobId, Scheduler, Timestamp};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Most messages handled in one batch.
const MAX_BATCH: usize = 1024;

/// How often the engine schedules with nothing new: priorities age, and months turn.
const TICK: Duration = Duration::from_secs(30);

/// How often remote nodes' heartbeats are checked.
const NODE_CHECK: Duration = Duration::from_millis(500);

pub(crate) enum Item {
    Request(Request),
    Report(AgentReport),
    /// Time to look for nodes that stopped sending heartbeats.
    NodeCheck,
}

impl Item {
    /// False for what cannot change a placement: questions, heartbeats, the node check (a
    /// node it declares DOWN asks for a pass itself), and submits (they name their jobs).
    fn may_change_placement(&self) -> bool {
        !matches!(
            self,
            Item::Request(
                Request::Submit { .. }
                    | Request::TestOnly { .. }
                    | Request::Signal { .. }
                    | Request::Nodes { .. }
                    | Request::Accounts { .. }
                    | Request::Credits { .. }
                    | Request::Why { .. }
                    | Request::CacheStatus { .. }
                    | Request::AgentHeartbeat { .. }
                    | Request::Suspend { .. }
            ) | Item::NodeCheck
        )
    }
}

/// What the next scheduling pass must look at.
#[derive(Debug, Default)]
pub(crate) enum PassNeed {
    /// Nothing changed that could change a decision.
    #[default]
    Nothing,
    /// Only these jobs were queued.
    Added(Vec<JobId>),
    /// Anything else: capacity, nodes, accounts, caches, time.
    Full,
}

impl PassNeed {
    /// Jobs were queued.
    pub(crate) fn add(&mut self, ids: &[u64]) {
        match self {
            PassNeed::Nothing => *self = PassNeed::Added(ids.iter().map(|i| JobId(*i)).collect()),
            PassNeed::Added(v) => v.extend(ids.iter().map(|i| JobId(*i))),
            PassNeed::Full => {}
        }
    }
}

/// What the controller knows of a node besides its spec.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    /// Where its GPUs come from: nvml, virtual or none.
    pub gpu_source: String,
    /// The cgroup isolation it offers.
    pub isolation: labpool_isolation::Support,
    /// Its dataset cache's root, when its agent said (over Slurm, jobs are told their paths).
    pub cache_dir: Option<std::path::PathBuf>,
    /// How it checkpoints GPU state, when it can: idle one-GPU sessions are suspended.
    pub checkpoint: Option<String>,
}

/// The engine's state.
pub struct Engine {
    pub(crate) config: Arc<Config>,
    pub(crate) db: Db,
    pub(crate) sched: Scheduler,
    /// Where each node's orders go: agents, remote or in-process, or the Slurm gate.
    pub(crate) reach: crate::nodes::reach::NodeReach,
    pub(crate) nodes_facts: BTreeMap<String, NodeFacts>,
    /// Attempts whose node has reported their environment in place: (job, attempt).
    pub(crate) envs_ready: BTreeSet<(u64, u32)>,
    /// Multi-node attempts still waiting for some of their nodes to report their environment
    /// in place: the nodes not yet done, and the notes of those done.
    pub(crate) env_gangs: BTreeMap<(u64, u32), answers::Answers>,
    /// Jobs not yet finished, with everything needed to launch them, in the lifecycle core.
    pub(crate) jobs: Lifecycle<JobRow>,
    /// What the current batch must write, send and answer.
    pub(crate) outbox: Outbox,
    /// The batch's transaction, once its submits opened it; the flush commits it.
    pub(crate) batch_tx: Option<sqlx::Transaction<'static, sqlx::Sqlite>>,
    /// What the next scheduling pass must look at.
    pub(crate) pass_need: PassNeed,
    /// The time the last full pass looked at: a `--begin`, deadline or reservation edge after
    /// it is still due, even when a batch that ran no full pass has carried the clock past it.
    pub(crate) full_pass_at: i64,
    pub(crate) controller_uid: u32,
    /// This month's credit ledger.
    pub(crate) ledger: crate::accounts::month_ledger::MonthLedger,
    /// What each account is for.
    pub(crate) descriptions: BTreeMap<String, String>,
    /// Datasets and node caches.
    pub(crate) data: DataState,
    /// Where the engine reads the time: the machine's clock, or a test's.
    pub(crate) clock: Arc<dyn Clock>,
    /// Set when the state file system is full, so the API answers with why.
    pub(crate) storage: StorageGate,
    /// When old submit keys were last forgotten (ms).
    pub(crate) keys_forgotten_at: i64,
    /// Each running attempt's mean GPU utilisation, kept by the monitor: the credit rebate
    /// reads it when the job ends.
    pub(crate) gpu_util: crate::health::UtilBoard,
    /// Nodes this engine marked down or draining because Slurm shows them so.
    pub(crate) slurm_marks: crate::nodes::slurm::SlurmMarks,
    /// Sessions whose nodes were told to suspend them, with when, until they answer.
    pub(crate) suspending: BTreeMap<u64, i64>,
    /// Sessions whose nodes were told to resume them, with when, until they answer.
    pub(crate) resuming: BTreeMap<u64, i64>,
}

impl Engine {
    /// An engine over `sched`, whose nodes are reached through `agents`.
    pub fn new(
        config: Arc<Config>,
        db: Db,
        sched: Scheduler,
        agents: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>,
        nodes_facts: BTreeMap<String, NodeFacts>,
        clock: Arc<dyn Clock>,
    ) -> Engine {
        Engine {
            config: config.clone(),
            db,
            sched,
            reach: crate::nodes::reach::NodeReach::new(agents),
            nodes_facts,
            envs_ready: BTreeSet::new(),
            env_gangs: BTreeMap::new(),
            jobs: Lifecycle::new(),
            outbox: Outbox::default(),
            batch_tx: None,
            pass_need: PassNeed::Full,
            full_pass_at: 0,
            controller_uid: effective_uid(),
            ledger: Default::default(),
            descriptions: BTreeMap::new(),
            data: DataState::new(config.manifests_dir()),
            clock,
            storage: StorageGate::default(),
            keys_forgotten_at: 0,
            gpu_util: Default::default(),
            slurm_marks: Default::default(),
            suspending: BTreeMap::new(),
            resuming: BTreeMap::new(),
        }
    }

    /// Serves requests and reports until `shutdown` turns true. A database failure ends the
    /// engine with an error: a controller that cannot record what it does must stop, and its
    /// restart reloads a consistent state.
    pub async fn run(
        mut self,
        requests: &mut mpsc::Receiver<Request>,
        reports: &mut mpsc::UnboundedReceiver<AgentReport>,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        self.schedule();
        let first = self.flush().await;
        self.tell_if_full(first)?;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut node_check = tokio::time::interval(NODE_CHECK);
        node_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut ticked = false;
            // A job's --begin time comes, or a reservation's edge: a pass is due then, not at
            // the next tick. Due since the last full pass, not since now: a batch of reports
            // that ran no full pass may have gone past it (then the wait is none).
            let now = self.clock.now_ms();
            let begin = self.sched.next_due(Timestamp(self.full_pass_at));
            let until_begin = crate::clock::real_wait(begin.map_or(0, |b| b.0 - now));
            let first = tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => break,
                _ = tokio::time::sleep(until_begin), if begin.is_some() => {
                    self.pass_need = PassNeed::Full;
                    None
                }
                Some(r) = requests.recv() => Some(Item::Request(r)),
                Some(r) = reports.recv() => Some(Item::Report(r)),
                _ = tick.tick() => {
                    // Priorities age and months turn: everything is looked at again.
                    self.pass_need = PassNeed::Full;
                    ticked = true;
                    None
                }
                _ = node_check.tick(), if !self.reach.remote.is_empty() => Some(Item::NodeCheck),
                else => break,
            };
            if ticked {
                self.forget_old_submit_keys().await;
            }
            let mut batch: Vec<Item> = first.into_iter().collect();
            while !batch.is_empty() && batch.len() < MAX_BATCH {
                if let Ok(r) = requests.try_recv() {
                    batch.push(Item::Request(r));
                } else if let Ok(r) = reports.try_recv() {
                    batch.push(Item::Report(r));
                } else {
                    break;
                }
            }
            let done = self.batch(batch).await;
            self.tell_if_full(done)?;
        }
        tracing::info!("engine stopped");
        Ok(())
    }

    /// Forgets submit keys past their week, at most once an hour.
    async fn forget_old_submit_keys(&mut self) {
        let now = self.clock.now_ms();
        if now - self.keys_forgotten_at < 3_600_000 {
            return;
        }
        self.keys_forgotten_at = now;
        if let Err(e) = self.db.forget_submit_keys(now).await {
            tracing::warn!("cannot forget old submit keys: {e}");
        }
    }

    /// One batch: handled, scheduled, written and answered.
    async fn batch(&mut self, batch: Vec<Item>) -> anyhow::Result<()> {
        let now = self.clock.now_ms();
        if self.ledger.is_over(now) {
            tracing::info!("a new month: credits and emergency tokens reset");
            self.load_month(now).await?;
        }
        self.handle(batch).await?;
        self.expire_reservations().await?;
        self.schedule();
        self.flush().await
    }

    /// Passes `result` on; a full state file system is first told to the API, before this
    /// engine (and the replies it holds) is dropped, so no caller hears a vaguer reason.
    fn tell_if_full(&self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        if let Err(e) = &result
            && storage::is_full(e)
        {
            self.storage.set(Some(storage::describe(
                &self.config.controller.state_dir,
                e,
            )));
        }
        result
    }

    async fn handle(&mut self, batch: Vec<Item>) -> anyhow::Result<()> {
        let mut submits = Vec::new();
        for item in batch {
            if item.may_change_placement() {
                self.pass_need = PassNeed::Full;
            }
            match item {
                Item::Request(Request::Submit { req, caller, reply }) => {
                    submits.push((req, caller, reply))
                }
                Item::Request(Request::Cancel { ids, caller, reply }) => {
                    let out = self.cancel(&ids, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Signal { req, caller, reply }) => {
                    let out = self.signal(&req, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Requeue { ids, caller, reply }) => {
                    let out = self.requeue(&ids, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Update { req, caller, reply }) => {
                    let out = self.update(&req, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::TestOnly { req, caller, reply }) => {
                    let out = self.test_only(&req, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Hold {
                    ids,
                    hold,
                    caller,
                    reply,
                }) => {
                    let out = self.hold(&ids, hold, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Suspend { job, reply }) => {
                    let out = self.suspend_idle(job);
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::WantBack { job }) => self.want_back(job),
                Item::Request(Request::Nodes { reply }) => {
                    let views = self.node_views();
                    self.outbox.reply(reply, views);
                }
                Item::Request(Request::Reload { config, reply }) => {
                    let out = self.reload(*config);
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Drain {
                    node,
                    reason,
                    caller,
                    reply,
                }) => {
                    let out = self.drain(&node, reason, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Account {
                    change,
                    caller,
                    reply,
                }) => {
                    let out = self.change_accounts(change, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Reservation {
                    change,
                    caller,
                    reply,
                }) => {
                    let out = self.reservation(change, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Accounts { reply }) => {
                    let view = self.accounts_view();
                    self.outbox.reply(reply, view);
                }
                Item::Request(Request::Grant { req, caller, reply }) => {
                    let out = self.grant(req, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::Credits { user, reply }) => {
                    let view = self.credits_view(&user);
                    self.outbox.reply(reply, view);
                }
                Item::Request(Request::Why { id, reply }) => {
                    let out = self.why(id).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::AddDataset {
                    dataset,
                    manifest,
                    caller,
                    reply,
                }) => {
                    let out = self.add_dataset(dataset, *manifest, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::AddVersion {
                    name,
                    version,
                    manifest,
                    caller,
                    reply,
                }) => {
                    let out = self.add_version(&name, version, *manifest, &caller).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::CacheStatus { node, reply }) => {
                    let status = self.cache_status(node.as_deref());
                    self.outbox.reply(reply, status);
                }
                Item::Request(Request::CacheStage { req, caller, reply }) => {
                    let out = self.warm_up(&req.name, req.node.as_deref(), caller.admin);
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::CacheVerify {
                    node,
                    caller,
                    reply,
                }) => self.start_verify(node.as_deref(), caller.admin, reply),
                Item::Request(Request::AgentRegister { reg, from, reply }) => {
                    let out = self.on_register(*reg, from).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::AgentHeartbeat { beat, reply }) => {
                    let out = self.on_heartbeat(beat);
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::AgentReports { batch, reply }) => {
                    let out = self.on_agent_reports(batch).await?;
                    self.outbox.reply(reply, out);
                }
                Item::Request(Request::SlurmView(view)) => self.on_slurm_view(view).await?,
                Item::Report(report) => self.on_report(report).await?,
                Item::NodeCheck => {
                    self.check_nodes().await?;
                    self.check_checkpoints().await;
                }
            }
        }
        if !submits.is_empty() {
            self.submit(submits).await?;
        }
        Ok(())
    }

    pub(crate) async fn on_report(&mut self, report: AgentReport) -> anyhow::Result<()> {
        match report {
            AgentReport::Ended {
                node,
                job,
                attempt,
                outcome,
                steps,
            } => {
                let event = Event::Ended {
                    node,
                    job,
                    attempt,
                    outcome,
                };
                let effects = self.jobs.handle(event, self.clock.now_ms());
                // Only the steps of an end the lifecycle took: a report from another node,
                // or for an attempt that is over, says nothing true about them.
                if !effects
                    .iter()
                    .any(|e| matches!(e, labpool_lifecycle::Effect::Ignored { .. }))
                {
                    self.outbox.steps(job, attempt, steps);
                }
                self.apply(effects);
            }
            AgentReport::Steps {
                node,
                job,
                attempt,
                steps,
            } => self.on_steps(&node, job, attempt, steps),
            AgentReport::EnvStaged {
                node,
                job,
                attempt,
                id,
                result,
            } => self.on_env_staged(node, job, attempt, id, result),
            AgentReport::Staging {
                node,
                purpose,
                name,
                version,
                progress,
            } => {
                self.on_staging(node, purpose, name, version, progress)
                    .await?
            }
            AgentReport::Staged {
                node,
                purpose,
                versions,
                result,
            } => {
                self.peer_stage_ended(&node, &versions);
                self.on_staged(node, purpose, versions, result).await?
            }
            AgentReport::Inventory {
                node,
                capacity,
                inventory,
            } => self.on_inventory(node, capacity, inventory),
            AgentReport::Verified {
                node,
                request,
                result,
            } => self.on_verified(node, request, result),
            AgentReport::Running {
                node,
                job,
                attempt,
                since_ms,
            } => {
                self.lifecycle(Event::RunningSince {
                    node,
                    job,
                    attempt,
                    time: since_ms,
                });
                // The charge counts from the same start.
                if self
                    .jobs
                    .job(job)
                    .is_some_and(|r| r.start_time == Some(since_ms))
                {
                    self.sched
                        .set_started(labpool_scheduler::JobId(job), Timestamp(since_ms));
                }
            }
            AgentReport::Checkpoint {
                node,
                job,
                attempt,
                resumed,
                failed,
            } => {
                self.on_checkpoint(node, job, attempt, resumed, failed)
                    .await
            }
            AgentReport::Adopted { job, attempt, .. } => {
                tracing::info!(job, attempt, "job re-adopted")
            }
            AgentReport::NeverStarted {
                node,
                job,
                attempt,
                why,
            } => self.lifecycle(Event::NeverStarted {
                node,
                job,
                attempt,
                why,
            }),
        }
        Ok(())
    }
}
