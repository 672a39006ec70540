//! The controller's view of the pool: it takes every node's GPU samples (the in-process node's
//! directly, remote agents' with their heartbeats), keeps each running attempt's usage summary
//! (persisted in `job_gpu_usage`), and on every tick evaluates the alert rules and the zombie
//! ladder and delivers what they decide. `/metrics` ([`metrics`]) and `labpool alerts`
//! ([`http`]) read what it holds. The rules themselves live in `labpool_monitor`.

pub mod db;
pub mod deliver;
pub mod doctor;
pub mod extras;
pub mod http;
mod idle;
pub mod mail;
pub mod metrics;
pub mod observe;
mod ready;
mod slices;
mod suspended;

pub use ready::readiness;

use crate::api::NodeView;
use crate::clock::Clock;
use crate::db::Db;
use crate::engine::request::Request;
use crate::jobs::rows::JobRow;
use crate::settings::Config;
use labpool_monitor::alerts::{Alert, Engine};
use labpool_monitor::sample::NodeSample;
use labpool_monitor::usage::{JobUsage, attribute};
use labpool_monitor::zombie::{Kind, Ladder};
use labpool_scheduler::JobState;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot, watch};

/// Each running attempt's mean GPU utilisation, percent: written by the monitor as samples
/// arrive, read (and removed) by the engine when the attempt ends, for the credit rebate.
pub type UtilBoard = Arc<Mutex<BTreeMap<(u64, u32), f64>>>;

/// A running attempt as the monitor needs it.
#[derive(Debug, Clone)]
pub struct Running {
    /// Job.
    pub job: u64,
    /// Attempt.
    pub attempt: u32,
    /// Owner.
    pub user: String,
    /// Partition.
    pub partition: String,
    /// Its GPUs, by node.
    pub gpus: BTreeMap<String, Vec<u32>>,
}

/// What the monitor holds between ticks.
#[derive(Default)]
pub(crate) struct Inner {
    /// Each node's latest sample, with the controller's time it arrived.
    pub samples: BTreeMap<String, (NodeSample, i64)>,
    /// Each remote agent's clock minus the controller's, ms, from its last heartbeat.
    pub skew_ms: BTreeMap<String, i64>,
    /// The jobs in the queue, from the last tick.
    pub jobs: Vec<JobRow>,
    /// The running attempts, from the last tick.
    pub running: BTreeMap<u64, Running>,
    /// The nodes, from the last tick.
    pub nodes: Vec<NodeView>,
    /// Running attempts' summaries.
    pub usage: BTreeMap<(u64, u32), JobUsage>,
    /// Summaries changed since the last save.
    pub dirty: BTreeSet<(u64, u32)>,
    /// Per (job, node): since when one of a multi-node job's nodes has had none of its
    /// processes while another had some.
    pub rank_gone: BTreeMap<(u64, String), i64>,
    /// The alert engine.
    pub alerts: Option<Engine>,
    /// The zombies found at the last tick: job to kind and since when.
    pub zombies: BTreeMap<u64, (Kind, i64)>,
    /// The zombie ladder.
    pub ladder: Ladder,
    /// Sliced jobs found over their slice, and what they were told.
    pub slice_watch: labpool_monitor::slice_watch::Watch,
    /// When each session's member last typed (or its notebook's kernel last ran), as its host
    /// reported.
    pub inputs: BTreeMap<u64, i64>,
    /// Idle sessions, and what they were told.
    pub idle_watch: labpool_monitor::idle_sessions::Watch,
    /// Suspended sessions, and what they were told.
    pub suspend_watch: labpool_monitor::idle_sessions::SuspendWatch,
    /// Words for each session's terminal, given to its host at its next report.
    pub idle_notices: BTreeMap<u64, String>,
    /// Alerts resolved lately, newest last (for `labpool alerts --all`).
    pub resolved: Vec<Alert>,
    /// Job notifications sent.
    pub mail: mail::MailState,
    /// Credits, caches, snapshots, quotas and the last purge, and when they were gathered.
    pub extras: (labpool_monitor::page::Extras, Option<i64>),
}

/// The monitor.
pub struct MonitorService {
    pub(crate) config: Arc<Config>,
    pub(crate) db: Db,
    pub(crate) engine: mpsc::Sender<Request>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) util_board: UtilBoard,
    pub(crate) quotas: Option<Arc<crate::quotas::QuotaService>>,
}

/// How many resolved alerts are kept for listing.
const RESOLVED_KEPT: usize = 100;

impl MonitorService {
    /// A monitor for this pool.
    pub fn new(
        config: Arc<Config>,
        db: Db,
        engine: mpsc::Sender<Request>,
        clock: Arc<dyn Clock>,
        util_board: UtilBoard,
        quotas: Option<Arc<crate::quotas::QuotaService>>,
    ) -> Arc<MonitorService> {
        let rules = labpool_monitor::alerts::rules::standard(&config.alerts.thresholds());
        Arc::new(MonitorService {
            config,
            db,
            engine,
            clock,
            util_board,
            quotas,
            inner: Mutex::new(Inner {
                alerts: Some(Engine::new(rules)),
                ..Inner::default()
            }),
        })
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A node's sample: kept for `/metrics`, and split among the jobs holding its GPUs.
    pub fn ingest(&self, node: &str, sample: NodeSample) {
        let now = self.clock.now_ms();
        let low = self.config.zombies.low_util_percent;
        let mut inner = self.lock();
        let inner = &mut *inner;
        let skew = inner.skew_ms.get(node).copied().unwrap_or(0);
        // The agent's time, brought onto the controller's clock.
        let at = (sample.at_ms - skew).min(now);
        let mut holders: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for r in inner.running.values() {
            for g in r.gpus.get(node).into_iter().flatten() {
                holders.entry(*g).or_default().push(r.job);
            }
        }
        for (job, reading) in attribute(&sample, &holders) {
            let Some(r) = inner.running.get(&job) else {
                continue;
            };
            let key = (job, r.attempt);
            if r.gpus.len() > 1 {
                // One node of a multi-node job: its own processes, against the job's others.
                let gone = reading.processes == 0;
                let slot = (job, node.to_string());
                if gone {
                    inner.rank_gone.entry(slot).or_insert(at);
                } else {
                    inner.rank_gone.remove(&slot);
                }
                // The job's summary takes the node it reported from first; the others add
                // their energy only, so a mean is not skewed by the order nodes report in.
                let first = r.gpus.keys().next().is_some_and(|n| n == node);
                let u = inner.usage.entry(key).or_default();
                if !first {
                    u.energy_j +=
                        reading.power_w * self.config.metrics.sample_interval.as_secs_f64();
                    inner.dirty.insert(key);
                    continue;
                }
            }
            let u = inner.usage.entry(key).or_default();
            u.add(at, &reading, low);
            let mean = u.util_mean();
            inner.dirty.insert(key);
            self.util_board
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, mean);
        }
        inner.samples.insert(node.to_string(), (sample, now));
    }

    /// A session's host reports in (`input`: its member typed since its last report; its first
    /// report counts as input): the words its terminal should show, if any are waiting.
    pub fn session_report(&self, job: u64, input: bool) -> Option<String> {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        if input || !inner.inputs.contains_key(&job) {
            inner.inputs.insert(job, now);
        }
        inner.idle_notices.remove(&job)
    }

    /// A remote agent's clock reading, sent with its heartbeat.
    pub fn clock_of(&self, node: &str, agent_ms: i64) {
        let now = self.clock.now_ms();
        self.lock().skew_ms.insert(node.to_string(), agent_ms - now);
    }

    /// Writes each GPU's latest utilisation and temperature into `nodes` (for the pool page
    /// and `labpool nodes --json`). A sample older than three sample intervals (at least 15 s) is left out: a
    /// node that stopped reporting shows no reading rather than an old one.
    pub fn fill_readings(&self, nodes: &mut [crate::api::NodeView]) {
        let now = self.clock.now_ms();
        let fresh_ms = (3 * self.config.metrics.sample_interval.as_millis() as i64).max(15_000);
        let inner = self.lock();
        for node in nodes {
            let Some((sample, _)) = inner
                .samples
                .get(&node.name)
                .filter(|(_, at)| now - *at <= fresh_ms)
            else {
                continue;
            };
            for gpu in &mut node.gpus {
                if let Some(s) = sample.gpus.iter().find(|s| s.index == gpu.index) {
                    gpu.util_percent = s.util;
                    gpu.temperature_c = s.temp_c;
                }
            }
        }
    }

    /// The alerts now firing, and those pending.
    pub fn alerts(&self) -> (Vec<Alert>, Vec<Alert>, Vec<Alert>) {
        let inner = self.lock();
        let e = inner.alerts.as_ref();
        (
            e.map(Engine::firing).unwrap_or_default(),
            e.map(Engine::pending).unwrap_or_default(),
            inner.resolved.clone(),
        )
    }

    /// One tick: refresh the queue and nodes, save summaries, evaluate the rules, deliver.
    pub async fn tick(&self) -> anyhow::Result<()> {
        let jobs = self.db.active_jobs(None).await?;
        let (tx, rx) = oneshot::channel();
        let nodes = match self.engine.send(Request::Nodes { reply: tx }).await {
            Ok(()) => rx.await.unwrap_or_default(),
            Err(_) => return Ok(()),
        };
        let running: BTreeMap<u64, Running> = jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .map(|j| (j.id, running_of(j)))
            .collect();
        let new: Vec<u64> = {
            let inner = self.lock();
            running
                .values()
                .filter(|r| !inner.usage.contains_key(&(r.job, r.attempt)))
                .map(|r| r.job)
                .collect()
        };
        let loaded = if new.is_empty() {
            BTreeMap::new()
        } else {
            self.db.gpu_usage_of(&new).await?
        };
        let save = {
            let mut inner = self.lock();
            for (job, u) in loaded {
                if let Some(r) = running.get(&job) {
                    inner.usage.entry((job, r.attempt)).or_insert(u);
                }
            }
            let dirty = std::mem::take(&mut inner.dirty);
            let save: BTreeMap<(u64, u32), JobUsage> = dirty
                .iter()
                .filter_map(|k| inner.usage.get(k).map(|u| (*k, u.clone())))
                .collect();
            inner.usage.retain(|(job, attempt), _| {
                running.get(job).is_some_and(|r| r.attempt == *attempt)
            });
            // Attempts that ended were read by the engine; any it did not read (no charge) go.
            self.util_board
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(job, attempt), _| {
                    running.get(job).is_some_and(|r| r.attempt == *attempt)
                });
            inner
                .rank_gone
                .retain(|(job, _), _| running.contains_key(job));
            inner.running = running;
            inner.jobs = jobs;
            inner.nodes = nodes;
            save
        };
        if !save.is_empty() {
            self.db.save_gpu_usage(&save).await?;
        }
        let now = self.clock.now_ms();
        let due = self
            .lock()
            .extras
            .1
            .is_none_or(|at| now - at >= extras::every_ms(self.config.metrics.sample_interval));
        if due {
            let x = extras::gather(self).await?;
            self.lock().extras = (x, Some(now));
        }
        let observations = observe::observations(self);
        let (changes, due) = {
            let now = self.clock.now_ms();
            let mut inner = self.lock();
            let inner = &mut *inner;
            let changes = inner
                .alerts
                .as_mut()
                .map(|e| e.observe(now, &observations))
                .unwrap_or_default();
            for c in &changes {
                if let labpool_monitor::alerts::Change::Resolved(a) = c {
                    inner.resolved.push(a.clone());
                }
            }
            let excess = inner.resolved.len().saturating_sub(RESOLVED_KEPT);
            inner.resolved.drain(..excess);
            let rules = self.config.zombies.rules();
            let due = inner.ladder.step(now, &inner.zombies, &rules);
            let measured = slices::measured(inner);
            let grace = self.config.jobs.slice_grace.as_millis() as i64;
            let over = inner.slice_watch.step(now, &measured, grace);
            let back = suspended::step(inner, now);
            let sessions = idle::seen(inner, &self.config, now);
            let idle = inner.idle_watch.step(now, &sessions);
            let running = &inner.running;
            inner.inputs.retain(|job, _| running.contains_key(job));
            inner
                .idle_notices
                .retain(|job, _| running.contains_key(job));
            (changes, (due, over, idle, back))
        };
        let (due, over, idle, back) = due;
        deliver::alerts(self, changes).await;
        deliver::zombies(self, due).await;
        slices::deliver(self, over).await;
        idle::deliver(self, idle).await;
        suspended::deliver(self, back).await;
        mail::step(self).await
    }
}

fn running_of(j: &JobRow) -> Running {
    let mut gpus: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    if let Some(n) = &j.node {
        gpus.insert(n.clone(), j.gpus.clone());
    }
    for o in &j.others {
        gpus.entry(o.node.clone()).or_default().extend(&o.gpus);
    }
    Running {
        job: j.id,
        attempt: j.attempt,
        user: j.spec.user.clone(),
        partition: j.spec.partition.clone(),
        gpus,
    }
}

/// Runs the monitor's ticks every sample interval until `stop`.
pub async fn run(service: Arc<MonitorService>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(service.config.metrics.sample_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if let Err(e) = service.tick().await {
            tracing::warn!("monitor tick failed: {e:#}");
        }
    }
}

/// Feeds a local sampler's readings to the monitor (the in-process node).
pub async fn feed(
    service: Arc<MonitorService>,
    node: String,
    mut samples: crate::embedded::Samples,
) {
    while samples.changed().await.is_ok() {
        let s = samples.borrow_and_update().clone();
        if let Some(s) = s {
            service.ingest(&node, s);
        }
    }
}
