//! The node agent's executor: starts shims, watches them, stops them, and re-adopts them after
//! a restart. The embedded default runs it in-process; its interface is the message pair in
//! [`crate::api::agent`].

use crate::api::agent::{AgentOrder, AgentReport, Launch, LaunchEnv, Outcome};
use crate::clock::now_ms;
use crate::environment::job_environment;
use crate::identity::groups_of;
use crate::jobdir::JobDir;
use crate::procs::kill_job_processes;
use crate::shim::{ShimSpec, signal_shim};
use crate::stager::Stager;
use labpool_isolation::{JobIsolation, Support, remove_groups};
use labpool_scheduler::JobState;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

mod adoption;
mod signals;
mod step_watch;
mod suspend;

/// How often a re-adopted job (not our child) is checked for its end.
const ADOPTED_POLL: Duration = Duration::from_millis(200);

/// A node's executor.
#[derive(Clone)]
pub struct Executor {
    node: String,
    spool: PathBuf,
    exe: PathBuf,
    reports: mpsc::UnboundedSender<AgentReport>,
    /// Attempts with a cancel requested; their end is reported as CANCELLED even when the shim
    /// died before it could say so.
    cancelled: Arc<Mutex<BTreeSet<(u64, u32)>>>,
    /// Shim pids of the attempts this executor started or adopted.
    shims: Arc<Mutex<BTreeMap<(u64, u32), i32>>>,
    /// Each end reported, until the controller forgets the attempt: sent again when the
    /// controller asks to adopt it (a report lost with a controller that could not write it).
    reported: Arc<Mutex<BTreeMap<(u64, u32), AgentReport>>>,
    /// The node's dataset cache.
    stager: Stager,
    /// How jobs are isolated on this node.
    isolation: Arc<NodeIsolation>,
    /// One lock per environment id: two jobs that need the same environment at once must not
    /// unpack it over each other; the second finds it complete.
    unpacking: Arc<Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// How this node checkpoints GPU state, when it can.
    checkpoint: Option<Arc<crate::checkpoint::Checkpointer>>,
    /// Suspended attempts, with what resuming them needs.
    suspended: Arc<Mutex<BTreeMap<(u64, u32), suspend::Suspended>>>,
}

/// What the executor needs to isolate jobs and run them inside environments.
#[derive(Debug, Clone, Default)]
pub struct NodeIsolation {
    /// The cgroup controllers the node offers.
    pub support: Support,
    /// Every GPU of the node: index → device minor (`/dev/nvidiaN` is `195:N`).
    pub gpu_minors: BTreeMap<u32, u32>,
    /// The tools that environments run with (ch-run, apptainer, Lmod).
    pub tools: labpool_envs::tools::Tools,
}

impl Executor {
    /// An executor for `node`, keeping job directories under `spool` and starting shims with
    /// the binary at `exe`.
    pub fn new(
        node: String,
        spool: PathBuf,
        exe: PathBuf,
        reports: mpsc::UnboundedSender<AgentReport>,
        stager: Stager,
        isolation: NodeIsolation,
    ) -> Executor {
        Executor {
            node,
            spool,
            exe,
            reports,
            cancelled: Arc::default(),
            shims: Arc::default(),
            reported: Arc::default(),
            stager,
            isolation: Arc::new(isolation),
            unpacking: Arc::default(),
            checkpoint: None,
            suspended: Arc::default(),
        }
    }

    /// This node suspends idle sessions with `checkpoint`.
    pub fn with_checkpoint(mut self, checkpoint: Option<crate::checkpoint::Checkpointer>) -> Self {
        self.checkpoint = checkpoint.map(Arc::new);
        self
    }

    /// Serves orders until the controller hangs up.
    pub async fn run(self, mut orders: mpsc::UnboundedReceiver<AgentOrder>) {
        while let Some(order) = orders.recv().await {
            match order {
                AgentOrder::Start(launch) => self.start(*launch),
                AgentOrder::Kill { job, attempt } => self.kill(job, attempt),
                AgentOrder::Notice {
                    job,
                    attempt,
                    by,
                    signal,
                    grace_ms,
                } => self.notice(job, attempt, by, signal, grace_ms),
                AgentOrder::Signal {
                    job,
                    attempt,
                    signal,
                    target,
                } => self.signal(job, attempt, signal, target),
                AgentOrder::Suspend { job, attempt, gpus } => {
                    self.checkpoint(job, attempt, gpus, false)
                }
                AgentOrder::Resume { job, attempt, gpus } => {
                    self.checkpoint(job, attempt, gpus, true)
                }
                AgentOrder::Adopt { expected } => self.adopt(expected),
                AgentOrder::Stage(order) => self.stager.stage(*order),
                AgentOrder::Verify { request, sources } => self.stager.verify(request, sources),
                AgentOrder::Inventory => self.stager.inventory(),
                AgentOrder::DropPrefetch { job } => self.stager.drop_prefetch(job),
                AgentOrder::StageEnv { job, attempt, env } => self.stage_env(job, attempt, env),
                AgentOrder::Forget { job, attempt } => {
                    self.stager.release(job, attempt);
                    self.shims
                        .lock()
                        .expect("not poisoned")
                        .remove(&(job, attempt));
                    let mut reported = self.reported.lock().expect("not poisoned");
                    reported.remove(&(job, attempt));
                    drop(reported);
                    self.cancelled
                        .lock()
                        .expect("not poisoned")
                        .remove(&(job, attempt));
                    self.suspended
                        .lock()
                        .expect("not poisoned")
                        .remove(&(job, attempt));
                    let dir = JobDir::new(&self.spool, job, attempt);
                    remove_groups(&self.isolation.support, &cgroup_name(&dir));
                    if let Err(e) = dir.remove() {
                        tracing::warn!(job, attempt, "cannot remove job directory: {e}");
                    }
                }
            }
        }
        self.stager.close();
    }

    fn report(&self, r: AgentReport) {
        // The controller only hangs up when it is shutting down; nothing is lost, because the
        // job's end stays on disk for the next controller.
        let _ = self.reports.send(r);
    }

    fn ended(&self, job: u64, attempt: u32, outcome: Outcome) {
        let dir = JobDir::new(&self.spool, job, attempt);
        let mut steps = dir.steps();
        crate::api::steps::close_running(&mut steps, outcome.end_time_ms);
        // What the job wrote in its corner goes now, whether or not the controller can record
        // the end yet (its state disk may be full): the report keeps the steps.
        dir.release_corner();
        let node = self.node.clone();
        let r = AgentReport::Ended {
            node,
            job,
            attempt,
            outcome,
            steps,
        };
        let mut reported = self.reported.lock().expect("not poisoned");
        reported.insert((job, attempt), r.clone());
        self.report(r);
    }

    fn start(&self, launch: Launch) {
        let (job, attempt) = (launch.job, launch.attempt);
        let versions = launch
            .staged()
            .map(|d| (d.name.clone(), d.version.clone()))
            .collect();
        self.stager.hold(job, attempt, versions);
        // Held first, then checked: the stager removes nothing held. The controller placed it
        // on what the last inventory said; a version removed since
        // (an unrepairable verify) must not become dangling links.
        if let Some(d) = launch
            .staged()
            .find(|d| !self.stager.cache().is_complete(&d.name, &d.version))
        {
            let why = format!(
                "dataset {}@{} is no longer complete in this node's cache; submit the job again",
                d.name, d.version
            );
            let outcome = Outcome::decided(JobState::Failed, now_ms(), why);
            self.stager.release(job, attempt);
            self.ended(job, attempt, outcome);
            return;
        }
        for d in launch.staged() {
            if let Err(e) = self
                .stager
                .cache()
                .note_use(&d.name, &d.version, d.hit, now_ms())
            {
                tracing::warn!(job, dataset = d.name, "cannot record a cache use: {e}");
            }
        }
        if !launch.datasets.is_empty() {
            self.stager.inventory();
        }
        match self.spawn_shim(&launch) {
            Ok(child) => {
                let pid = child.id().map_or(0, |p| p as i32);
                self.shims
                    .lock()
                    .expect("not poisoned")
                    .insert((job, attempt), pid);
                tracing::info!(job, attempt, shim = pid, gpus = ?launch.gpus, "job started");
                let this = self.clone();
                tokio::spawn(async move { this.watch_child(job, attempt, child).await });
            }
            Err(e) => {
                tracing::error!(job, attempt, "cannot start job: {e}");
                let why = format!("the node could not start the job: {e}");
                let outcome = Outcome::decided(JobState::Failed, now_ms(), why);
                self.ended(job, attempt, outcome);
            }
        }
    }

    /// Puts an environment on the node, off the async threads (unpacking takes seconds).
    fn stage_env(&self, job: u64, attempt: u32, env: LaunchEnv) {
        let this = self.clone();
        let lock = self
            .unpacking
            .lock()
            .expect("not poisoned")
            .entry(env.id.clone())
            .or_default()
            .clone();
        tokio::spawn(async move {
            let _one_at_a_time = lock.lock().await;
            let (dir, archive) = (env.dir.clone(), env.archive.clone());
            let result =
                tokio::task::spawn_blocking(move || labpool_envs::pack::unpack(&archive, &dir))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()));
            match &result {
                Ok(true) => {
                    tracing::info!(job, env = env.name, id = env.id, "environment unpacked")
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(job, env = env.name, "cannot stage environment: {e}"),
            }
            this.report(AgentReport::EnvStaged {
                node: this.node.clone(),
                job,
                attempt,
                id: env.id,
                result,
            });
        });
    }

    /// The program, arguments and environment of the job's shim, wrapped in its software
    /// environment when it names one.
    fn job_command(
        &self,
        launch: &Launch,
        dir: &JobDir,
        env: BTreeMap<String, String>,
    ) -> std::io::Result<labpool_envs::activate::Command> {
        let Some(e) = &launch.env else {
            return Ok(labpool_envs::activate::Command {
                program: dir.script_path(),
                args: launch.args.clone(),
                env,
            });
        };
        if !labpool_envs::pack::is_complete(&e.dir) {
            // It was staged for this attempt moments ago; only a removal since can get here.
            return Err(std::io::Error::other(format!(
                "environment {} ({}) went missing at {} on this node just before the job started; submit the job again",
                e.name,
                e.id,
                e.dir.display()
            )));
        }
        labpool_envs::activate::wrap(&labpool_envs::activate::WrapRequest {
            kind: e.kind,
            dir: &e.dir,
            tools: &self.isolation.tools,
            script: &dir.script_path(),
            text: &launch.script,
            args: &launch.args,
            workdir: &launch.workdir,
            env,
        })
        .map_err(|err| std::io::Error::other(format!("environment {}: {err}", e.name)))
    }

    /// The cgroups the job runs in: every GPU of the node it was not given is denied, and its
    /// memory reservation is its limit.
    fn job_isolation(&self, launch: &Launch, dir: &JobDir) -> Option<JobIsolation> {
        let support = &self.isolation.support;
        if support.devices.is_none() && support.memory.is_none() {
            return None;
        }
        let gpus = self.isolation.gpu_minors.iter().map(|(i, m)| (*i, *m));
        Some(support.for_launch(&cgroup_name(dir), gpus, &launch.gpus, launch.mem_mib))
    }

    fn spawn_shim(&self, launch: &Launch) -> std::io::Result<tokio::process::Child> {
        let dir = JobDir::new(&self.spool, launch.job, launch.attempt);
        dir.create(
            launch.uid,
            launch.gid,
            &launch.script,
            crate::hub_cache::room(launch),
        )?;
        let cached = super::environment::dataset_dirs(launch, self.stager.cache());
        let links = dir.link_datasets(&cached)?;
        let commands = dir.link_commands(&self.exe)?;
        let mut env = job_environment(launch, &self.node, &dir.key(), links.as_deref(), &cached);
        // `srun` and `scontrol` inside the job are labpool's, whatever else is installed.
        let path = env.get("PATH").cloned().unwrap_or_default();
        env.insert("PATH".into(), format!("{}:{path}", commands.display()));
        env.insert(
            crate::env_vars::LABPOOL_STEPS.into(),
            dir.steps_path().display().to_string(),
        );
        env.insert(
            crate::env_vars::LABPOOL_PREEMPT_NOTICE.into(),
            signals::notice_path(&dir).display().to_string(),
        );
        crate::slice::prepare(launch, &dir, &mut env)?;
        crate::hub_cache::prepare(launch, &dir, &cached, &mut env)?;
        let command = match crate::gang::prepare(launch, &dir, &self.exe, &mut env)? {
            Some(program) => labpool_envs::activate::Command {
                program,
                args: Vec::new(),
                env,
            },
            None => self.job_command(launch, &dir, env)?,
        };
        let spec = ShimSpec {
            job: launch.job,
            attempt: launch.attempt,
            user: launch.user.clone(),
            uid: launch.uid,
            gid: launch.gid,
            groups: groups_of(&launch.user, launch.gid),
            program: command.program,
            args: command.args,
            workdir: launch.workdir.clone(),
            stdout: launch.stdout.clone(),
            stderr: launch.stderr.clone(),
            env: command.env,
            time_limit_s: launch.time_limit_s,
            kill_grace_ms: launch.kill_grace_ms,
            umask: launch.umask,
            isolation: self.job_isolation(launch, &dir),
            signal: launch.signal,
            open_append: launch.open_append,
            login_env_s: launch.get_user_env,
        };
        // The spec holds the job's environment, which may hold secrets: private from the start.
        dir.write_spec(&spec)?;
        let log = std::fs::File::create(dir.log_path())?;
        // Nothing runs between fork and exec (the shim makes its own session as it starts), so
        // the standard library spawns it with posix_spawn: the controller's memory is not copied
        // for each job, which with a deep queue cost more than the rest of the start.
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.arg("shim")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        tokio::process::Command::from(cmd).spawn()
    }

    async fn watch_child(&self, job: u64, attempt: u32, mut child: tokio::process::Child) {
        self.spawn_step_watch(job, attempt);
        let status = child.wait().await;
        let dir = JobDir::new(&self.spool, job, attempt);
        let status_file = dir.status();
        // The shim sets room aside just before it spawns the script, and records the start
        // just after: from the room on, the script may have run. Its processes carry the
        // job's key.
        let ran = status_file.is_none() && (dir.reserved() || kill_job_processes(&dir.key()) > 0);
        let outcome = match status_file {
            Some(outcome) => outcome,
            // The script ran, but its shim died without recording the end (killed, out of
            // memory): the job's processes must not outlive it on GPUs that are now free.
            None if ran => self.died(
                &dir,
                JobState::Failed,
                &format!("the job's shim died ({status:?}) while the job ran"),
            ),
            None => {
                let cancelled = self
                    .cancelled
                    .lock()
                    .expect("not poisoned")
                    .contains(&(job, attempt));
                let (state, reason) = if cancelled {
                    (
                        JobState::Cancelled,
                        "cancelled before it started".to_string(),
                    )
                } else {
                    let tail = dir.log_tail(5);
                    (
                        JobState::Failed,
                        format!(
                            "the job's shim ended ({status:?}) before starting the job; its log says: {tail}"
                        ),
                    )
                };
                Outcome {
                    state,
                    exit_code: None,
                    signal: None,
                    end_time_ms: now_ms(),
                    reason: Some(reason),
                }
            }
        };
        self.ended(job, attempt, outcome);
    }

    pub(super) fn kill(&self, job: u64, attempt: u32) {
        self.cancelled
            .lock()
            .expect("not poisoned")
            .insert((job, attempt));
        let known = self
            .shims
            .lock()
            .expect("not poisoned")
            .get(&(job, attempt))
            .copied();
        let pid = known.or_else(|| JobDir::new(&self.spool, job, attempt).shim_pid());
        match pid {
            Some(pid) => {
                if let Err(e) = signal_shim(pid) {
                    tracing::warn!(job, attempt, pid, "cannot signal shim: {e}");
                }
            }
            None => tracing::warn!(job, attempt, "kill for an attempt this node is not running"),
        }
    }

    /// The outcome of an attempt whose shim died without recording one. Whatever the job left
    /// running has no shim to answer for it any more, so it is killed, found by the job's
    /// identity in its environment (never by a recorded pid, which may since have been reused).
    fn died(&self, dir: &JobDir, state: JobState, what: &str) -> Outcome {
        let killed = kill_job_processes(&dir.key());
        if killed > 0 {
            tracing::warn!(
                job = dir.job,
                attempt = dir.attempt,
                killed,
                "killed processes of a job whose shim died"
            );
        }
        Outcome {
            state,
            exit_code: None,
            signal: None,
            end_time_ms: now_ms(),
            reason: Some(format!(
                "{what}; last lines of its shim log: {}",
                dir.log_tail(3)
            )),
        }
    }
}

/// The name of an attempt's cgroups: unique on the machine even with several pools on it (a
/// demo beside a production pool), like the job key, but without slashes.
pub fn cgroup_name(dir: &JobDir) -> String {
    // FNV-1a over the spool path: stable, and short enough for a directory name.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir
        .path()
        .parent()
        .unwrap_or(dir.path())
        .as_os_str()
        .as_encoded_bytes()
    {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}-{}.{}", h as u32, dir.job, dir.attempt)
}
