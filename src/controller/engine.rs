//! The controller's engine: the one task that owns the scheduler and changes state. API
//! handlers and agents send it messages; it commits each change to the database, then acts
//! (orders to agents, replies to callers). Messages that arrive together are handled as one
//! batch, followed by one scheduling pass. Submits are in [`crate::controller::submit`];
//! accounts, limits, credits and `why` in [`crate::controller::admin`].

use crate::agent::protocol::{AgentOrder, AgentReport, ArrayEnv, Launch, Outcome};
use crate::api::{
    AccountChange, AccountsView, CancelOutcome, CreditsView, GpuView, GrantRequest, NodeView,
    SubmitRequest, Submitted, WhyView,
};
use crate::clock::{month_of, now, now_ms};
use crate::controller::dataset_db::{DatasetRow, VersionRow};
use crate::controller::db::{Db, JobRow};
use crate::controller::error::ApiError;
use crate::controller::jobs::Outbox;
use crate::controller::staging::DataState;
use crate::data_api::{CacheStatus, DatasetView, StageQueued, StageRequest, VerifiedVersion};
use crate::identity::{Caller, effective_uid};
use crate::settings::Config;
use labpool_cache::manifest::Manifest;
use labpool_lifecycle::rules::{self, Recovery};
use labpool_lifecycle::{Event, Lifecycle, Placement, Readiness, StageKind};
use labpool_scheduler::array::parse_array;
use labpool_scheduler::credits::{Entry, month_summary};
use labpool_scheduler::options::{PatternValues, expand_pattern};
use labpool_scheduler::{Allocation, Decision, JobId, JobState, Scheduler, Timestamp};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// Output file pattern when the job names none (Slurm's is `slurm-%j.out`).
pub const DEFAULT_OUTPUT: &str = "labpool-%j.out";

/// Most messages handled in one batch.
const MAX_BATCH: usize = 1024;

/// How often the engine schedules with nothing new: priorities age, and months turn.
const TICK: Duration = Duration::from_secs(30);

/// How often remote nodes' heartbeats are checked.
const NODE_CHECK: Duration = Duration::from_millis(500);

/// A request from an API handler.
pub enum Request {
    /// Queue a job (or an array of them).
    Submit {
        /// The job.
        req: Box<SubmitRequest>,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<Submitted, ApiError>>,
    },
    /// Cancel jobs.
    Cancel {
        /// Which, as named (`12`, `12_3`).
        ids: Vec<String>,
        /// Who.
        caller: Caller,
        /// Answer, one per id.
        reply: oneshot::Sender<Vec<CancelOutcome>>,
    },
    /// Describe the nodes.
    Nodes {
        /// Answer.
        reply: oneshot::Sender<Vec<NodeView>>,
    },
    /// Drain a node (a reason) or resume it (`None`) (admins).
    Drain {
        /// The node.
        node: String,
        /// Why; `None` resumes it.
        reason: Option<String>,
        /// Who.
        caller: Caller,
        /// Answer: the node afterwards.
        reply: oneshot::Sender<Result<NodeView, ApiError>>,
    },
    /// Change accounts or limits (admins).
    Account {
        /// The change.
        change: AccountChange,
        /// Who.
        caller: Caller,
        /// Answer: what was done.
        reply: oneshot::Sender<Result<String, ApiError>>,
    },
    /// Describe accounts and limits.
    Accounts {
        /// Answer.
        reply: oneshot::Sender<AccountsView>,
    },
    /// Grant credit (admins).
    Grant {
        /// The grant.
        req: GrantRequest,
        /// Who.
        caller: Caller,
        /// Answer: the user's month after it.
        reply: oneshot::Sender<Result<CreditsView, ApiError>>,
    },
    /// A user's credits this month.
    Credits {
        /// Whose.
        user: String,
        /// Answer.
        reply: oneshot::Sender<CreditsView>,
    },
    /// Why a job waits.
    Why {
        /// Which.
        id: u64,
        /// Answer.
        reply: oneshot::Sender<Result<WhyView, ApiError>>,
    },
    /// Record a new dataset, scanned and its manifest saved (admins).
    AddDataset {
        /// The dataset.
        dataset: DatasetRow,
        /// Its first version's manifest.
        manifest: Box<Manifest>,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<DatasetView, ApiError>>,
    },
    /// Record a dataset's new version after a rescan (admins).
    AddVersion {
        /// Dataset.
        name: String,
        /// The version.
        version: VersionRow,
        /// Its manifest.
        manifest: Box<Manifest>,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<DatasetView, ApiError>>,
    },
    /// Describe node caches.
    CacheStatus {
        /// One node, or all.
        node: Option<String>,
        /// Answer.
        reply: oneshot::Sender<Result<Vec<CacheStatus>, ApiError>>,
    },
    /// Warm node caches with a dataset (admins).
    CacheStage {
        /// What and where.
        req: StageRequest,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<StageQueued, ApiError>>,
    },
    /// A node agent registers.
    AgentRegister {
        /// What it says of itself.
        reg: Box<crate::agent::protocol::Registration>,
        /// The connection's address.
        from: std::net::SocketAddr,
        /// Answer.
        reply: oneshot::Sender<Result<crate::agent::protocol::Registered, ApiError>>,
    },
    /// A node agent's heartbeat.
    AgentHeartbeat {
        /// The heartbeat.
        beat: crate::agent::protocol::Heartbeat,
        /// Answer: refused when the agent must register again.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// Reports from a node agent.
    AgentReports {
        /// The batch.
        batch: crate::agent::protocol::ReportBatch,
        /// Answer: refused when the agent must register again.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// Verify node caches (admins).
    CacheVerify {
        /// One node, or all.
        node: Option<String>,
        /// Who.
        caller: Caller,
        /// Answer, when every node has verified.
        reply: oneshot::Sender<Result<Vec<VerifiedVersion>, ApiError>>,
    },
}

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
                    | Request::Nodes { .. }
                    | Request::Accounts { .. }
                    | Request::Credits { .. }
                    | Request::Why { .. }
                    | Request::CacheStatus { .. }
                    | Request::AgentHeartbeat { .. }
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
    pub isolation: crate::agent::isolation::Support,
}

/// The engine's state.
pub struct Engine {
    pub(crate) config: Arc<Config>,
    pub(crate) db: Db,
    pub(crate) sched: Scheduler,
    pub(crate) agents: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>,
    pub(crate) nodes_facts: BTreeMap<String, NodeFacts>,
    /// Attempts whose node has reported their environment in place: (job, attempt).
    pub(crate) envs_ready: BTreeSet<(u64, u32)>,
    /// Jobs not yet finished, with everything needed to launch them, in the lifecycle core.
    pub(crate) jobs: Lifecycle<JobRow>,
    /// What the current batch must write, send and answer.
    pub(crate) outbox: Outbox,
    /// What the next scheduling pass must look at.
    pub(crate) pass_need: PassNeed,
    pub(crate) controller_uid: u32,
    /// This month's ledger entries, oldest first, and the month's bounds (ms).
    pub(crate) ledger: Vec<Entry>,
    pub(crate) month: (i64, i64),
    /// What each account is for.
    pub(crate) descriptions: BTreeMap<String, String>,
    /// Datasets and node caches.
    pub(crate) data: DataState,
    /// Nodes served by remote agents.
    pub(crate) remote: BTreeMap<String, crate::controller::cluster::RemoteNode>,
    /// The client order links to remote agents sign with; `None` when no agents are taken.
    pub(crate) cluster: Option<crate::transport::SignedClient>,
    /// The controller's own node, when it runs one in-process.
    pub(crate) local_node: Option<String>,
}

impl Engine {
    /// An engine over `sched`, whose nodes are reached through `agents`.
    pub fn new(
        config: Arc<Config>,
        db: Db,
        sched: Scheduler,
        agents: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>,
        nodes_facts: BTreeMap<String, NodeFacts>,
    ) -> Engine {
        Engine {
            config: config.clone(),
            db,
            sched,
            agents,
            nodes_facts,
            envs_ready: BTreeSet::new(),
            jobs: Lifecycle::new(),
            outbox: Outbox::default(),
            pass_need: PassNeed::Full,
            controller_uid: effective_uid(),
            ledger: Vec::new(),
            month: (0, 0),
            descriptions: BTreeMap::new(),
            data: DataState::new(config.manifests_dir()),
            remote: BTreeMap::new(),
            cluster: None,
            local_node: None,
        }
    }

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
        let since = now_ms() - (4 * w.half_life_s as i64).saturating_mul(1000);
        for row in self
            .db
            .finished_jobs(None, Some(since), 1_000_000)
            .await?
            .iter()
            .rev()
        {
            if let (Some(start), Some(end)) = (row.start_time, row.end_time) {
                let gpu_seconds = row.gpus.len() as f64 * ((end - start).max(0) / 1000) as f64;
                self.sched
                    .record_usage(&row.spec.user, gpu_seconds, Timestamp(end));
                if row.state == JobState::Completed {
                    self.sched.learn_runtime(&row.spec, end - start);
                }
            }
        }
        self.load_month(now_ms()).await?;
        self.restore_remote().await?;

        let rows = self.db.active_jobs(None).await?;
        for row in rows {
            if let Recovery::Queue = rules::recover(&row.life) {
                self.sched.enqueue(row.spec.clone());
            } else {
                let alloc = Allocation {
                    start: Timestamp(row.start_time.unwrap_or(row.spec.submit_time.0)),
                    node: row.node.clone().unwrap_or_default(),
                    gpus: row.gpus.clone(),
                    cpus: row.spec.resources.cpus,
                    mem_mib: row.spec.resources.mem_mib,
                    shared: row.spec.resources.gpu_share && !row.gpus.is_empty(),
                };
                if let Err(e) = self.sched.restore_running(row.spec.clone(), alloc) {
                    // Its node or GPUs are gone from the configuration: it cannot be re-adopted.
                    tracing::error!("{e}");
                    let end = Outcome::decided(JobState::NodeFail, now_ms(), e.to_string());
                    self.outbox.persist(row.id, rules::ended(end, None));
                    self.sched.note_outcome(JobId(row.id), false);
                    continue;
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
        for (node, reason) in self.db.drained_nodes().await? {
            self.sched.set_node_drain(&node, Some(reason));
        }
        self.restore_data().await?;
        let (pending, running) = (self.sched.pending().count(), self.sched.running().count());
        tracing::info!(pending, running, "state restored");
        // Each node keeps the attempts expected there and kills any other; cancels asked for
        // before the restart are carried out now.
        let recovery = self.jobs.recover(self.agents.keys().map(String::as_str));
        self.apply(recovery);
        self.flush().await
    }

    /// Loads the month that holds `at`: its ledger entries, and every known user's balance.
    async fn load_month(&mut self, at: i64) -> anyhow::Result<()> {
        let (start, end, _, _) = month_of(at);
        self.month = (start, end);
        // Everyone starts the month from the grant; last month's balances must not linger.
        self.sched.clear_balances();
        self.ledger = self
            .db
            .ledger(None, start)
            .await?
            .into_iter()
            .filter(|e| e.time.0 < end)
            .collect();
        let users: BTreeSet<String> = self
            .ledger
            .iter()
            .map(|e| e.user.clone())
            .chain(self.jobs.jobs().map(|(_, r)| r.spec.user.clone()))
            .chain(self.sched.pending().map(|j| j.user.clone()))
            .collect();
        for user in users {
            self.refresh_balance(&user);
        }
        Ok(())
    }

    /// This month's summary for `user`, from the in-memory ledger.
    pub(crate) fn summary(&self, user: &str) -> labpool_scheduler::credits::MonthSummary {
        let policy = &self.sched.policy().credits;
        month_summary(
            policy,
            &self.ledger,
            user,
            Timestamp(self.month.0),
            Timestamp(self.month.1),
        )
    }

    /// Tells the scheduler `user`'s balance after a ledger change.
    pub(crate) fn refresh_balance(&mut self, user: &str) {
        let balance = self.summary(user).balance;
        self.sched.set_balance(user, balance);
    }

    /// Serves requests and reports until `shutdown` turns true. A database failure ends the
    /// engine with an error: a controller that cannot record what it does must stop, and its
    /// restart reloads a consistent state.
    pub async fn run(
        mut self,
        mut requests: mpsc::Receiver<Request>,
        mut reports: mpsc::UnboundedReceiver<AgentReport>,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        self.schedule();
        self.flush().await?;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut node_check = tokio::time::interval(NODE_CHECK);
        node_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let first = tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => break,
                Some(r) = requests.recv() => Some(Item::Request(r)),
                Some(r) = reports.recv() => Some(Item::Report(r)),
                _ = tick.tick() => {
                    // Priorities age and months turn: everything is looked at again.
                    self.pass_need = PassNeed::Full;
                    None
                }
                _ = node_check.tick(), if !self.remote.is_empty() => Some(Item::NodeCheck),
                else => break,
            };
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
            let now = now_ms();
            if now >= self.month.1 {
                tracing::info!("a new month: credits and emergency tokens reset");
                self.load_month(now).await?;
            }
            self.handle(batch).await?;
            self.schedule();
            self.flush().await?;
        }
        tracing::info!("engine stopped");
        Ok(())
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
                Item::Request(Request::Nodes { reply }) => {
                    let views = self.node_views();
                    self.outbox.reply(reply, views);
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
                Item::Report(report) => self.on_report(report).await?,
                Item::NodeCheck => self.check_nodes().await?,
            }
        }
        if !submits.is_empty() {
            self.submit(submits).await?;
        }
        Ok(())
    }

    /// One scheduling pass, when something happened that can change a decision: its
    /// placements and reasons go through the lifecycle, so they are committed with the batch
    /// before any start reaches a node. After submits alone, the scheduler considers only the
    /// new jobs when that gives what a full pass would.
    fn schedule(&mut self) {
        let need = std::mem::take(&mut self.pass_need);
        if matches!(need, PassNeed::Nothing) {
            return;
        }
        let pass_time = now();
        let view = self.pass_cache_view();
        let decisions = match need {
            PassNeed::Added(ids) => self.sched.schedule_appended(pass_time, &view, &ids),
            _ => self.sched.schedule_with(pass_time, &view),
        };
        let mut prefetches = Vec::new();
        for d in decisions {
            match d {
                Decision::Start {
                    job, allocation, ..
                } => self.place(job.0, allocation),
                Decision::Wait { job, reason } => self.lifecycle(Event::Waiting {
                    job: job.0,
                    code: reason.code,
                    detail: reason.detail,
                }),
                Decision::Prefetch {
                    job, node, dataset, ..
                } => prefetches.push((job.0, node, dataset)),
            }
        }
        self.prefetch(prefetches);
    }

    /// The scheduler placed `job`: it starts, or waits for its datasets or environment.
    fn place(&mut self, job: u64, allocation: Allocation) {
        let Some(row) = self.jobs.job(job) else {
            tracing::error!(job, "a scheduled job is not active");
            return;
        };
        let (stdout, stderr) = output_paths(row, &allocation.node);
        let datasets = row.spec.datasets.clone();
        let (versions, complete) = self.placement_versions(&datasets, &allocation.node);
        if !versions.is_empty() {
            self.outbox.job_datasets(job, versions.clone());
            self.data.job_versions.insert(job, versions.clone());
        }
        let row = self.jobs.job(job).expect("checked above");
        let ready = if !complete {
            let what = versions
                .iter()
                .map(|(n, v)| format!("{n}@{}", crate::data_api::short(v)))
                .collect::<Vec<_>>()
                .join(", ");
            Readiness::Stage(StageKind::Data, format!("staging {what}"))
        } else if row.request.env_id.is_some() {
            // A new attempt has no environment in place yet.
            Readiness::Stage(
                StageKind::Env,
                Engine::env_staging_detail(row, &allocation.node),
            )
        } else {
            Readiness::Ready {
                isolation: self.isolation_text(
                    &allocation.node,
                    &allocation.gpus,
                    allocation.mem_mib,
                ),
            }
        };
        let placement = Placement {
            node: allocation.node,
            gpus: allocation.gpus,
            stdout,
            stderr,
        };
        self.lifecycle(Event::Placed {
            job,
            placement,
            ready,
        });
    }

    /// The launch of a job's attempt; `hit` when its datasets were staged before it was placed.
    pub(crate) fn launch(
        &self,
        row: &JobRow,
        alloc: &Allocation,
        stdout: PathBuf,
        stderr: PathBuf,
        hit: bool,
    ) -> (String, Launch) {
        let (home, shell) = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(row.uid)) {
            Ok(Some(u)) => (u.dir, u.shell),
            _ => (PathBuf::from("/"), PathBuf::from("/bin/sh")),
        };
        let req = &row.request;
        let array = row.spec.array.as_ref().and_then(|a| {
            let tasks = parse_array(req.array.as_deref()?).ok()?.tasks;
            Some(ArrayEnv {
                array_id: a.array_id.0,
                task: a.task,
                count: tasks.len() as u32,
                min: *tasks.first()?,
                max: *tasks.last()?,
            })
        });
        let launch = Launch {
            job: row.id,
            attempt: row.attempt,
            name: row.spec.name.clone(),
            user: row.spec.user.clone(),
            uid: row.uid,
            gid: row.gid,
            home,
            shell,
            partition: row.spec.partition.clone(),
            account: row.spec.account.clone(),
            script: req.script.clone(),
            args: req.args.clone(),
            workdir: req.workdir.clone(),
            stdout,
            stderr,
            environment: req.environment.clone(),
            gpus: alloc.gpus.clone(),
            cpus: alloc.cpus,
            mem_mib: alloc.mem_mib,
            time_limit_s: crate::api::limit_secs(row.spec.time_limit),
            kill_grace_ms: self.config.controller.kill_grace.as_millis() as u64,
            umask: req.umask,
            array,
            datasets: self.launch_datasets(row.id, hit),
            env: self.launch_env(row),
            gpu_env: self.config.jobs.gpu_env(),
        };
        (alloc.node.clone(), launch)
    }

    pub(crate) async fn on_report(&mut self, report: AgentReport) -> anyhow::Result<()> {
        match report {
            AgentReport::Ended {
                node,
                job,
                attempt,
                outcome,
            } => self.lifecycle(Event::Ended {
                node,
                job,
                attempt,
                outcome,
            }),
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
            AgentReport::Adopted { job, attempt, .. } => {
                tracing::info!(job, attempt, "job re-adopted")
            }
            AgentReport::NeverStarted { node, job, attempt } => {
                self.lifecycle(Event::NeverStarted { node, job, attempt })
            }
        }
        Ok(())
    }

    /// The jobs a cancel names: `N` (a job, or every task of array N) or `A_T` (one task).
    async fn resolve_ids(&self, name: &str) -> anyhow::Result<Result<Vec<u64>, String>> {
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

    async fn cancel(
        &mut self,
        names: &[String],
        caller: &Caller,
    ) -> anyhow::Result<Vec<CancelOutcome>> {
        let mut out = Vec::new();
        for name in names {
            let reply = |ok: bool, message: String| CancelOutcome {
                id: name.clone(),
                ok,
                message,
            };
            let ids = match self.resolve_ids(name).await? {
                Ok(ids) => ids,
                Err(message) => {
                    out.push(reply(false, message));
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
                if row.uid != caller.uid && !caller.admin {
                    out.push(reply(
                        false,
                        format!(
                            "job {id} belongs to {}; you ({}) may cancel only your own jobs (admins: root and group {})",
                            row.spec.user, caller.user, self.config.controller.admin_group
                        ),
                    ));
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
                        let grace = humantime::format_duration(self.config.controller.kill_grace);
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
                if done.is_empty() && !out.iter().any(|o| &o.id == name) {
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

    /// Drains `node` (no new jobs; running ones finish) or resumes it. Kept across restarts.
    async fn drain(
        &mut self,
        node: &str,
        reason: Option<String>,
        caller: &Caller,
    ) -> anyhow::Result<Result<NodeView, ApiError>> {
        let what = if reason.is_some() {
            "drain nodes"
        } else {
            "resume nodes"
        };
        if let Err(e) = crate::controller::http::admin_only(&self.config, caller, what) {
            return Ok(Err(e));
        }
        if let Some(r) = &reason
            && (r.trim().is_empty() || r.len() > 200)
        {
            return Ok(Err(ApiError::bad_request(
                "a drain needs a reason of 1 to 200 characters, for the people whose jobs wait",
                Some("labpool node drain NODE --reason \"disk replacement\"".to_string()),
            )));
        }
        let reason = reason.map(|r| format!("{r} (by {})", caller.user));
        if !self.sched.set_node_drain(node, reason.clone()) {
            let known: Vec<String> = self.sched.nodes().map(|n| n.name().to_string()).collect();
            return Ok(Err(ApiError::not_found(
                format!("no node {node:?}"),
                Some(format!("the nodes are: {}", known.join(", "))),
            )));
        }
        self.db.set_node_drain(node, reason.as_deref()).await?;
        match &reason {
            Some(r) => tracing::info!(node, reason = %r, "node draining"),
            None => tracing::info!(node, "node resumed"),
        }
        let view = self
            .node_views()
            .into_iter()
            .find(|n| n.name == node)
            .expect("the node was just found");
        Ok(Ok(view))
    }

    fn node_views(&self) -> Vec<NodeView> {
        self.sched
            .nodes()
            .map(|n| {
                let facts = self.nodes_facts.get(n.name());
                let gpus: Vec<GpuView> = n
                    .spec
                    .gpus
                    .iter()
                    .map(|g| GpuView {
                        index: g.index,
                        gpu_type: g.gpu_type.clone(),
                        product: g.product.clone(),
                        memory_mib: g.memory_mib,
                        uuid: g.uuid.clone(),
                        job: n.gpu_holders(g.index).first().map(|j| j.0),
                        jobs: n.gpu_holders(g.index).iter().map(|j| j.0).collect(),
                        share: g.share,
                    })
                    .collect();
                NodeView {
                    name: n.name().to_string(),
                    state: n.state(),
                    reason: n.down.clone().or_else(|| n.drain.clone()),
                    gpu_source: facts.map(|f| f.gpu_source.clone()).unwrap_or_default(),
                    isolation: facts.map(|f| f.isolation.describe()).unwrap_or_default(),
                    gpus_free: gpus.iter().filter(|g| g.job.is_none()).count() as u32,
                    gpus,
                    cpus: n.spec.cpus,
                    cpus_used: n.spec.cpus - n.free_cpus(),
                    mem_mib: n.spec.mem_mib,
                    mem_used_mib: n.spec.mem_mib - n.free_mem_mib(),
                    agent: self.remote.get(n.name()).map(|r| r.address.clone()),
                    last_seen: self.last_seen(n.name()).map(|t| crate::clock::rfc3339(t.0)),
                    load: self.heartbeat_of(n.name()).map(|b| b.load),
                    mem_available_mib: self.heartbeat_of(n.name()).map(|b| b.mem_available_mib),
                }
            })
            .collect()
    }
}

/// The job's output files, patterns expanded and taken relative to its working directory.
fn output_paths(row: &JobRow, node: &str) -> (PathBuf, PathBuf) {
    let values = PatternValues {
        job_id: row.id,
        job_name: &row.spec.name,
        user: &row.spec.user,
        node,
        array: row.spec.array.as_ref().map(|a| (a.array_id.0, a.task)),
    };
    let req = &row.request;
    let resolve = |pattern: &str| -> PathBuf {
        let p = Path::new(&expand_pattern(pattern, &values)).to_path_buf();
        if p.is_absolute() {
            p
        } else {
            req.workdir.join(p)
        }
    };
    let stdout = resolve(req.output.as_deref().unwrap_or(DEFAULT_OUTPUT));
    let stderr = req.error.as_deref().map_or_else(|| stdout.clone(), resolve);
    (stdout, stderr)
}
