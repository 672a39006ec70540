//! The controller's engine: the one task that owns the scheduler and changes state. API
//! handlers and agents send it messages; it commits each change to the database, then acts
//! (orders to agents, replies to callers). Messages that arrive together are handled as one
//! batch in one transaction, followed by one scheduling pass.

use crate::agent::protocol::{AgentOrder, AgentReport, Launch, Outcome};
use crate::api::{CancelOutcome, GpuView, NodeView, SubmitRequest, Submitted};
use crate::clock::{now, now_ms};
use crate::controller::db::{Db, JobRow, NewJob};
use crate::controller::error::ApiError;
use crate::identity::{Caller, effective_uid, user_name};
use crate::settings::Config;
use labpool_scheduler::options::{PatternValues, check_name, expand_pattern};
use labpool_scheduler::{
    Allocation, Decision, JobId, JobSpec, JobState, Resources, Scheduler, Timestamp,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// Output file pattern when the job names none (Slurm's is `slurm-%j.out`).
pub const DEFAULT_OUTPUT: &str = "labpool-%j.out";

/// Most messages handled in one batch.
const MAX_BATCH: usize = 1024;

/// A request from an API handler.
pub enum Request {
    /// Queue a job.
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
        /// Which.
        ids: Vec<u64>,
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
}

/// A submit waiting for its batch's transaction.
struct SubmitItem {
    req: Box<SubmitRequest>,
    caller: Caller,
    reply: oneshot::Sender<Result<Submitted, ApiError>>,
}

enum Item {
    Request(Request),
    Report(AgentReport),
}

/// The engine's state.
pub struct Engine {
    config: Arc<Config>,
    db: Db,
    sched: Scheduler,
    agents: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>,
    gpu_sources: BTreeMap<String, String>,
    /// Jobs not yet finished, with everything needed to launch them.
    active: BTreeMap<u64, JobRow>,
    controller_uid: u32,
}

impl Engine {
    /// An engine over `sched`, whose nodes are reached through `agents`.
    pub fn new(
        config: Arc<Config>,
        db: Db,
        sched: Scheduler,
        agents: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>,
        gpu_sources: BTreeMap<String, String>,
    ) -> Engine {
        Engine {
            config,
            db,
            sched,
            agents,
            gpu_sources,
            active: BTreeMap::new(),
            controller_uid: effective_uid(),
        }
    }

    /// Reloads unfinished jobs after a (re)start: waiting jobs wait again, and running ones hold
    /// their GPUs while their nodes are asked to re-adopt them.
    pub async fn restore(&mut self) -> anyhow::Result<()> {
        let rows = self.db.active_jobs(None).await?;
        let mut expected: BTreeMap<String, Vec<(u64, u32)>> = BTreeMap::new();
        let mut lost = Vec::new();
        for row in rows {
            match row.state {
                JobState::Pending => self.sched.enqueue(row.spec.clone()),
                _ => {
                    let alloc = Allocation {
                        start: Timestamp(row.start_time.unwrap_or(row.spec.submit_time.0)),
                        node: row.node.clone().unwrap_or_default(),
                        gpus: row.gpus.clone(),
                        cpus: row.spec.resources.cpus,
                        mem_mib: row.spec.resources.mem_mib,
                    };
                    match self.sched.restore_running(row.spec.clone(), alloc.clone()) {
                        Ok(()) => expected
                            .entry(alloc.node)
                            .or_default()
                            .push((row.id, row.attempt)),
                        Err(e) => {
                            tracing::error!("{e}");
                            lost.push((row.id, e.to_string()));
                        }
                    }
                }
            }
            self.active.insert(row.id, row);
        }
        if !lost.is_empty() {
            let mut tx = self.db.begin().await?;
            for (id, why) in &lost {
                Db::mark_ended(
                    &mut tx,
                    *id,
                    JobState::NodeFail,
                    None,
                    None,
                    now_ms(),
                    None,
                    Some(why),
                )
                .await?;
                self.active.remove(id);
            }
            tx.commit().await?;
        }
        let (pending, running) = (self.sched.pending().count(), self.sched.running().count());
        tracing::info!(pending, running, "state restored");
        for (node, link) in &self.agents {
            let expected = expected.remove(node).unwrap_or_default();
            let _ = link.send(AgentOrder::Adopt { expected });
        }
        // Cancels that were asked for before the restart are carried out now.
        for row in self
            .active
            .values()
            .filter(|r| r.state == JobState::Running && r.cancel_requested_by.is_some())
        {
            if let Some(link) = row.node.as_ref().and_then(|n| self.agents.get(n)) {
                let _ = link.send(AgentOrder::Kill {
                    job: row.id,
                    attempt: row.attempt,
                });
            }
        }
        Ok(())
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
        self.schedule().await?;
        loop {
            let first = tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => break,
                Some(r) = requests.recv() => Item::Request(r),
                Some(r) = reports.recv() => Item::Report(r),
                else => break,
            };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                if let Ok(r) = requests.try_recv() {
                    batch.push(Item::Request(r));
                } else if let Ok(r) = reports.try_recv() {
                    batch.push(Item::Report(r));
                } else {
                    break;
                }
            }
            self.handle(batch).await?;
            self.schedule().await?;
        }
        tracing::info!("engine stopped");
        Ok(())
    }

    async fn handle(&mut self, batch: Vec<Item>) -> anyhow::Result<()> {
        let mut submits = Vec::new();
        for item in batch {
            match item {
                Item::Request(Request::Submit { req, caller, reply }) => {
                    submits.push(SubmitItem { req, caller, reply })
                }
                Item::Request(Request::Cancel { ids, caller, reply }) => {
                    let out = self.cancel(&ids, &caller).await?;
                    let _ = reply.send(out);
                }
                Item::Request(Request::Nodes { reply }) => {
                    let _ = reply.send(self.node_views());
                }
                Item::Report(report) => self.on_report(report).await?,
            }
        }
        if !submits.is_empty() {
            self.submit(submits).await?;
        }
        Ok(())
    }

    fn check_submit(
        &self,
        req: &SubmitRequest,
        caller: &Caller,
    ) -> Result<(String, labpool_scheduler::TimeLimit), ApiError> {
        if self.controller_uid != 0 && caller.uid != self.controller_uid {
            let me = user_name(self.controller_uid);
            return Err(ApiError::forbidden(
                format!(
                    "this controller runs as {me}, not root, so it runs only {me}'s jobs; {} cannot submit here",
                    caller.user
                ),
                Some("run `labpool serve` as root to serve every user".to_string()),
            ));
        }
        if !req.workdir.is_absolute() {
            return Err(ApiError::bad_request(
                format!("workdir {} is not an absolute path", req.workdir.display()),
                None,
            ));
        }
        check_name(&req.name).map_err(|e| ApiError::bad_request(e.to_string(), None))?;
        if !req.script.starts_with("#!") {
            return Err(ApiError::bad_request(
                "the script does not start with '#!'",
                Some("add an interpreter line such as #!/bin/bash".to_string()),
            ));
        }
        if req.cpus == 0 {
            return Err(ApiError::bad_request("cpus must be at least 1", None));
        }
        if req.gpus == 0 && req.gpu_type.is_some() {
            return Err(ApiError::bad_request(
                "gpu_type is set but gpus is 0",
                Some("ask for --gpus TYPE:N".to_string()),
            ));
        }
        let resources = resources_of(req);
        let admit = labpool_scheduler::admission::AdmitRequest {
            user: &caller.user,
            account: None,
            partition: req.partition.as_deref(),
            time_limit: req.time_limit,
            resources: &resources,
            emergency: false,
            count: 1,
        };
        let admitted = self
            .sched
            .admit(&admit)
            .map_err(|e| ApiError::bad_request(e.to_string(), e.hint()))?;
        Ok((admitted.partition, admitted.time_limit))
    }

    async fn submit(&mut self, batch: Vec<SubmitItem>) -> anyhow::Result<()> {
        let now = now_ms();
        let mut accepted = Vec::new();
        for SubmitItem { req, caller, reply } in batch {
            match self.check_submit(&req, &caller) {
                Ok((partition, time_limit)) => {
                    accepted.push((req, caller, reply, partition, time_limit))
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        }
        if accepted.is_empty() {
            return Ok(());
        }
        let mut tx = self.db.begin().await?;
        let mut ids = Vec::with_capacity(accepted.len());
        for (req, caller, _, partition, time_limit) in &accepted {
            let new = NewJob {
                uid: caller.uid,
                gid: caller.gid,
                user: &caller.user,
                partition,
                time_limit: *time_limit,
                request: req,
                submit_time: now,
            };
            ids.push(Db::insert_job(&mut tx, &new).await?);
        }
        tx.commit().await?;
        for ((req, caller, reply, partition, time_limit), id) in accepted.into_iter().zip(ids) {
            let spec = JobSpec {
                id: JobId(id),
                name: req.name.clone(),
                user: caller.user.clone(),
                partition: partition.clone(),
                resources: resources_of(&req),
                time_limit,
                submit_time: Timestamp(now),
                ..JobSpec::default()
            };
            self.sched.enqueue(spec.clone());
            self.active.insert(
                id,
                JobRow {
                    id,
                    uid: caller.uid,
                    gid: caller.gid,
                    state: JobState::Pending,
                    spec,
                    reason: None,
                    reason_detail: None,
                    node: None,
                    gpus: Vec::new(),
                    exit_code: None,
                    signal: None,
                    start_time: None,
                    end_time: None,
                    attempt: 0,
                    cancel_requested_by: None,
                    stdout: None,
                    stderr: None,
                    request: *req,
                },
            );
            tracing::debug!(job = id, user = %caller.user, "submitted");
            let _ = reply.send(Ok(Submitted {
                job_id: id,
                partition,
                time_limit,
            }));
        }
        Ok(())
    }

    /// One scheduling pass: decisions are committed, then the starts are sent to the nodes.
    async fn schedule(&mut self) -> anyhow::Result<()> {
        let decisions = self.sched.schedule(now());
        if decisions.is_empty() {
            return Ok(());
        }
        let start_time = now_ms();
        let mut tx = self.db.begin().await?;
        let mut launches = Vec::new();
        for d in decisions {
            match d {
                Decision::Start {
                    job, allocation, ..
                } => {
                    let row = self
                        .active
                        .get_mut(&job.0)
                        .expect("a scheduled job is active");
                    row.attempt += 1;
                    let (stdout, stderr) = output_paths(row, &allocation.node);
                    Db::mark_started(
                        &mut tx,
                        job.0,
                        &allocation.node,
                        &allocation.gpus,
                        row.attempt,
                        start_time,
                        &stdout,
                        &stderr,
                    )
                    .await?;
                    row.state = JobState::Running;
                    row.node = Some(allocation.node.clone());
                    row.gpus = allocation.gpus.clone();
                    row.start_time = Some(start_time);
                    row.reason = None;
                    row.reason_detail = None;
                    row.stdout = Some(stdout.clone());
                    row.stderr = Some(stderr.clone());
                    let row = row.clone();
                    launches.push(self.launch(&row, &allocation, stdout, stderr));
                }
                Decision::Wait { job, reason } => {
                    Db::set_reason(&mut tx, job.0, &reason.code, &reason.detail).await?;
                    if let Some(row) = self.active.get_mut(&job.0) {
                        row.reason = Some(reason.code);
                        row.reason_detail = Some(reason.detail);
                    }
                }
                // Staging ahead of a predicted start needs the node cache (datasets issue).
                Decision::Prefetch { .. } => {}
            }
        }
        tx.commit().await?;
        for (node, launch) in launches {
            match self.agents.get(&node) {
                Some(link) => {
                    let _ = link.send(AgentOrder::Start(Box::new(launch)));
                }
                None => tracing::error!(node, "no agent for node"),
            }
        }
        Ok(())
    }

    fn launch(
        &self,
        row: &JobRow,
        alloc: &Allocation,
        stdout: PathBuf,
        stderr: PathBuf,
    ) -> (String, Launch) {
        let (home, shell) = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(row.uid)) {
            Ok(Some(u)) => (u.dir, u.shell),
            _ => (PathBuf::from("/"), PathBuf::from("/bin/sh")),
        };
        let req = &row.request;
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
        };
        (alloc.node.clone(), launch)
    }

    async fn on_report(&mut self, report: AgentReport) -> anyhow::Result<()> {
        match report {
            AgentReport::Ended {
                node,
                job,
                attempt,
                outcome,
            } => {
                let current = self
                    .active
                    .get(&job)
                    .is_some_and(|r| r.attempt == attempt && r.state == JobState::Running);
                if current {
                    self.record_end(job, outcome).await?;
                } else {
                    tracing::warn!(
                        job,
                        attempt,
                        node,
                        "end of an attempt that is not current; ignored"
                    );
                }
                if let Some(link) = self.agents.get(&node) {
                    let _ = link.send(AgentOrder::Forget { job, attempt });
                }
            }
            AgentReport::Adopted { job, attempt, .. } => {
                tracing::info!(job, attempt, "job re-adopted")
            }
            AgentReport::NeverStarted { job, attempt, .. } => {
                let current = self
                    .active
                    .get(&job)
                    .is_some_and(|r| r.attempt == attempt && r.state == JobState::Running);
                let cancelled_by = self
                    .active
                    .get(&job)
                    .and_then(|r| r.cancel_requested_by.clone());
                if current && let Some(by) = cancelled_by {
                    let outcome = Outcome {
                        state: JobState::Cancelled,
                        exit_code: None,
                        signal: None,
                        end_time_ms: now_ms(),
                        reason: Some(format!("cancelled by {by}")),
                    };
                    self.record_end(job, outcome).await?;
                } else if current {
                    let why = "the controller stopped before the job started; it waits again";
                    let mut tx = self.db.begin().await?;
                    Db::mark_requeued(&mut tx, job, now_ms(), why).await?;
                    tx.commit().await?;
                    self.sched.requeue(JobId(job));
                    if let Some(row) = self.active.get_mut(&job) {
                        row.state = JobState::Pending;
                        row.node = None;
                        row.gpus.clear();
                        row.start_time = None;
                        row.reason = Some("Requeued".to_string());
                        row.reason_detail = Some(why.to_string());
                    }
                    tracing::info!(job, attempt, "requeued: never started");
                }
            }
        }
        Ok(())
    }

    async fn record_end(&mut self, job: u64, outcome: Outcome) -> anyhow::Result<()> {
        let cancelled_by = self
            .active
            .get(&job)
            .and_then(|r| r.cancel_requested_by.clone());
        let detail = match (outcome.state, cancelled_by) {
            (JobState::Cancelled, Some(by)) => Some(format!("cancelled by {by}")),
            _ => outcome.reason.clone(),
        };
        let mut tx = self.db.begin().await?;
        Db::mark_ended(
            &mut tx,
            job,
            outcome.state,
            outcome.exit_code,
            outcome.signal,
            outcome.end_time_ms,
            None,
            detail.as_deref(),
        )
        .await?;
        tx.commit().await?;
        self.sched
            .finish(JobId(job), outcome.state, Timestamp(outcome.end_time_ms));
        self.active.remove(&job);
        tracing::info!(job, state = %outcome.state, exit_code = ?outcome.exit_code, "job ended");
        Ok(())
    }

    async fn cancel(&mut self, ids: &[u64], caller: &Caller) -> anyhow::Result<Vec<CancelOutcome>> {
        let mut out = Vec::new();
        let mut kills = Vec::new();
        let mut tx = self.db.begin().await?;
        let now = now_ms();
        for &id in ids {
            let reply = |ok: bool, message: String| CancelOutcome { id, ok, message };
            let Some(row) = self.active.get(&id) else {
                let message = match self.db.job(id).await? {
                    Some(r) => format!("job {id} already ended ({})", r.state),
                    None => format!("no job {id}"),
                };
                out.push(reply(false, message));
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
                continue;
            }
            match row.state {
                JobState::Pending => {
                    let detail = format!("cancelled by {} while pending", caller.user);
                    Db::mark_ended(
                        &mut tx,
                        id,
                        JobState::Cancelled,
                        None,
                        None,
                        now,
                        None,
                        Some(&detail),
                    )
                    .await?;
                    self.sched.remove_pending(JobId(id));
                    self.active.remove(&id);
                    out.push(reply(true, format!("job {id} cancelled")));
                }
                _ => {
                    let node = row.node.clone().unwrap_or_default();
                    let attempt = row.attempt;
                    Db::request_cancel(&mut tx, id, now, &caller.user).await?;
                    kills.push((node, id, attempt, caller.user.clone()));
                    let grace = humantime::format_duration(self.config.controller.kill_grace);
                    out.push(reply(
                        true,
                        format!("job {id} is being stopped (TERM, then KILL after {grace})"),
                    ));
                }
            }
        }
        tx.commit().await?;
        // Only once the request is on disk: a controller that dies now still stops the job
        // after its restart.
        for (node, job, attempt, by) in kills {
            if let Some(row) = self.active.get_mut(&job) {
                row.cancel_requested_by = Some(by);
            }
            if let Some(link) = self.agents.get(&node) {
                let _ = link.send(AgentOrder::Kill { job, attempt });
            }
        }
        Ok(out)
    }

    fn node_views(&self) -> Vec<NodeView> {
        self.sched
            .nodes()
            .map(|n| {
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
                        job: n.gpu_owner(g.index).map(|j| j.0),
                    })
                    .collect();
                NodeView {
                    name: n.name().to_string(),
                    state: n.state(),
                    reason: n.down.clone().or_else(|| n.drain.clone()),
                    gpu_source: self.gpu_sources.get(n.name()).cloned().unwrap_or_default(),
                    gpus_free: gpus.iter().filter(|g| g.job.is_none()).count() as u32,
                    gpus,
                    cpus: n.spec.cpus,
                    cpus_used: n.spec.cpus - n.free_cpus(),
                    mem_mib: n.spec.mem_mib,
                    mem_used_mib: n.spec.mem_mib - n.free_mem_mib(),
                }
            })
            .collect()
    }
}

fn resources_of(req: &SubmitRequest) -> Resources {
    Resources {
        gpus: req.gpus,
        gpu_type: req.gpu_type.clone(),
        cpus: req.cpus,
        mem_mib: req.mem_mib,
    }
}

/// The job's output files, patterns expanded and taken relative to its working directory.
fn output_paths(row: &JobRow, node: &str) -> (PathBuf, PathBuf) {
    let values = PatternValues {
        job_id: row.id,
        job_name: &row.spec.name,
        user: &row.spec.user,
        node,
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
