//! The node agent's stager: one worker thread that stages dataset versions into the node cache,
//! makes room by removing unpinned versions, trims the cache back under its watermarks, and
//! verifies it. Stages for placed jobs go before prefetches and warm-ups; within each kind, first
//! come first served. Copying itself is parallel inside [`NodeCache::stage`].

use crate::api::agent::{AgentReport, StageFailure, StageFor, StageItem, StageOrder, Staged};
use crate::peer::PeerConnector;
use labpool_cache::CacheError;
use labpool_cache::evict::prefetch_may_evict;
use labpool_cache::manifest::Manifest;
use labpool_cache::store::{NodeCache, Progress, StageOptions, eviction_order, plan};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Shortest time between two progress reports of one stage.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// How the node's cache is run, from `[cache]` in the config.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// Root directory.
    pub dir: PathBuf,
    /// Capacity, bytes; `None`: 90% of the file system the root is on.
    pub capacity: Option<u64>,
    /// Trim above this share of capacity...
    pub high_watermark: f64,
    /// ...down to this share.
    pub low_watermark: f64,
    /// Copy workers and bandwidth.
    pub options: StageOptions,
}

/// How the stager reaches peers, once an agent has set it.
type Peers = Arc<Mutex<Option<Arc<dyn PeerConnector>>>>;

/// Versions read by running attempts, by (job, attempt).
type InUse = Arc<Mutex<BTreeMap<(u64, u32), Vec<(String, String)>>>>;

enum Task {
    Stage(Box<StageOrder>),
    /// A queued prefetch whose job was placed on another node: reported as done, not copied.
    Dropped(Box<StageOrder>),
    Verify {
        request: u64,
        sources: BTreeMap<(String, String), PathBuf>,
    },
    Inventory,
}

#[derive(Default)]
struct Queue {
    urgent: VecDeque<Task>,
    background: VecDeque<Task>,
    closed: bool,
}

/// Handle to a node's stager thread.
#[derive(Clone)]
pub struct Stager {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    /// Versions that jobs started by this agent are reading, by attempt: never removed.
    in_use: InUse,
    cache: NodeCache,
    peers: Peers,
}

impl Stager {
    /// Opens the cache (cleaning up what a crash left) and starts the worker thread.
    pub fn start(
        node: String,
        settings: CacheSettings,
        reports: mpsc::UnboundedSender<AgentReport>,
    ) -> Result<Stager, CacheError> {
        let cache = NodeCache::open(&settings.dir)?;
        let capacity = settings
            .capacity
            .unwrap_or_else(|| default_capacity(&settings.dir, cache.used_bytes()));
        let stager = Stager {
            queue: Arc::default(),
            in_use: Arc::default(),
            cache: cache.clone(),
            peers: Arc::default(),
        };
        let worker = Worker {
            node,
            cache,
            capacity,
            settings,
            reports,
            in_use: stager.in_use.clone(),
            peers: stager.peers.clone(),
        };
        let queue = stager.queue.clone();
        std::thread::Builder::new()
            .name("labpool-stager".into())
            .spawn(move || worker.run(&queue))
            .map_err(|e| CacheError::io(Path::new("stager thread"), e))?;
        stager.push(Task::Inventory, true);
        Ok(stager)
    }

    /// Lets stages take files from the peers their orders name (a remote agent; the one-box
    /// controller's in-process agent has no peers).
    pub fn set_peers(&self, peers: Arc<dyn PeerConnector>) {
        *self.peers.lock().expect("not poisoned") = Some(peers);
    }

    /// The cache this stager fills.
    pub fn cache(&self) -> &NodeCache {
        &self.cache
    }

    fn push(&self, task: Task, urgent: bool) {
        let (lock, cv) = &*self.queue;
        let mut q = lock.lock().expect("not poisoned");
        if urgent {
            q.urgent.push_back(task);
        } else {
            q.background.push_back(task);
        }
        cv.notify_one();
    }

    /// Queues a stage; a placed job's, or a held job's stage-in, goes before prefetches and
    /// warm-ups.
    pub fn stage(&self, order: StageOrder) {
        let urgent = matches!(
            order.purpose,
            StageFor::Job { .. } | StageFor::StageIn { .. }
        );
        self.push(Task::Stage(Box::new(order)), urgent);
    }

    /// Drops the queued prefetches for `job`, which was placed on another node: each is
    /// reported as ended without copying anything. One already copying runs to its end.
    pub fn drop_prefetch(&self, job: u64) {
        let (lock, cv) = &*self.queue;
        let mut q = lock.lock().expect("not poisoned");
        let (dropped, kept): (VecDeque<Task>, VecDeque<Task>) = q
            .background
            .drain(..)
            .partition(|t| matches!(t, Task::Stage(o) if o.purpose == StageFor::Prefetch { job }));
        q.background = kept;
        for t in dropped {
            if let Task::Stage(o) = t {
                q.urgent.push_front(Task::Dropped(o));
            }
        }
        cv.notify_one();
    }

    /// Queues a verify of every complete version.
    pub fn verify(&self, request: u64, sources: Vec<((String, String), PathBuf)>) {
        let sources = sources.into_iter().collect();
        self.push(Task::Verify { request, sources }, true);
    }

    /// Queues an inventory report.
    pub fn inventory(&self) {
        self.push(Task::Inventory, true);
    }

    /// Marks versions as read by a running attempt, so that they are never removed under it.
    pub fn hold(&self, job: u64, attempt: u32, versions: Vec<(String, String)>) {
        if !versions.is_empty() {
            let mut in_use = self.in_use.lock().expect("not poisoned");
            in_use.insert((job, attempt), versions);
        }
    }

    /// The attempt has ended: its versions may be removed again.
    pub fn release(&self, job: u64, attempt: u32) {
        self.in_use
            .lock()
            .expect("not poisoned")
            .remove(&(job, attempt));
    }

    /// Stops the worker after the task at hand.
    pub fn close(&self) {
        let (lock, cv) = &*self.queue;
        lock.lock().expect("not poisoned").closed = true;
        cv.notify_all();
    }
}

/// 90% of the file system that holds `dir`, but no more than the cache holds now plus what is
/// free (the disk may be shared with job output); 0 when it cannot be read.
fn default_capacity(dir: &Path, cached: u64) -> u64 {
    match nix::sys::statvfs::statvfs(dir) {
        Ok(s) => {
            let size = s.blocks().saturating_mul(s.fragment_size()) / 10 * 9;
            let free = s.blocks_available().saturating_mul(s.fragment_size());
            size.min(cached + free)
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "cannot size the cache's file system: {e}; set capacity under [cache]");
            0
        }
    }
}

struct Worker {
    node: String,
    cache: NodeCache,
    capacity: u64,
    settings: CacheSettings,
    reports: mpsc::UnboundedSender<AgentReport>,
    in_use: InUse,
    peers: Peers,
}

impl Worker {
    fn run(self, queue: &(Mutex<Queue>, Condvar)) {
        let (lock, cv) = queue;
        loop {
            let task = {
                let mut q = lock.lock().expect("not poisoned");
                loop {
                    if q.closed {
                        return;
                    }
                    if let Some(t) = q.urgent.pop_front().or_else(|| q.background.pop_front()) {
                        break t;
                    }
                    q = cv.wait(q).expect("not poisoned");
                }
            };
            match task {
                Task::Stage(order) => {
                    let result = self.stage(&order);
                    if let Err(e) = &result {
                        tracing::warn!(purpose = ?order.purpose, "stage failed: {e:?}");
                    }
                    self.report_staged(&order, result);
                    self.report_inventory();
                }
                Task::Dropped(order) => self.report_staged(&order, Ok(Vec::new())),
                Task::Verify { request, sources } => {
                    let result = self.verify(&sources).map_err(|e| e.to_string());
                    let _ = self.reports.send(AgentReport::Verified {
                        node: self.node.clone(),
                        request,
                        result,
                    });
                    self.report_inventory();
                }
                Task::Inventory => self.report_inventory(),
            }
        }
    }

    /// Tells the controller how a stage order ended.
    fn report_staged(&self, order: &StageOrder, result: Result<Vec<Staged>, StageFailure>) {
        let _ = self.reports.send(AgentReport::Staged {
            node: self.node.clone(),
            purpose: order.purpose,
            versions: order
                .items
                .iter()
                .map(|i| (i.name.clone(), i.version.clone()))
                .collect(),
            result,
        });
    }

    fn report_inventory(&self) {
        match self.cache.inventory() {
            Ok(inventory) => {
                let _ = self.reports.send(AgentReport::Inventory {
                    node: self.node.clone(),
                    capacity: self.capacity,
                    inventory,
                });
            }
            Err(e) => tracing::error!("cannot list the node cache: {e}"),
        }
    }

    /// Versions that must stay: the order's pins, what running jobs read (read now), and what
    /// it stages.
    fn pins(&self, order: &StageOrder) -> BTreeSet<(String, String)> {
        let in_use = self.in_use.lock().expect("not poisoned");
        order
            .pinned
            .iter()
            .cloned()
            .chain(in_use.values().flatten().cloned())
            .chain(
                order
                    .items
                    .iter()
                    .map(|i| (i.name.clone(), i.version.clone())),
            )
            .collect()
    }

    /// Removes a version unless a running job reads it; the check and the removal happen under
    /// the lock that job starts take, so a job never starts on a version being removed.
    fn remove_unless_in_use(&self, name: &str, version: &str) -> Result<bool, CacheError> {
        let in_use = self.in_use.lock().expect("not poisoned");
        if in_use
            .values()
            .flatten()
            .any(|(n, v)| n == name && v == version)
        {
            return Ok(false);
        }
        self.cache.remove(name, version)?;
        Ok(true)
    }

    /// Removes unpinned versions until `needed` more bytes fit under `limit`. Per-version
    /// unique bytes undercount versions that share files, so when the plan says no, versions
    /// are removed one at a time, in eviction order, and the cache measured again, as long as
    /// removing every unpinned version could make the room.
    fn make_room(
        &self,
        needed: u64,
        limit: u64,
        pins: &BTreeSet<(String, String)>,
        next_use: &BTreeMap<(String, String), usize>,
    ) -> Result<(), CacheError> {
        let mut pins = pins.clone();
        loop {
            let inv = self.cache.inventory()?;
            let evict = match plan(
                &inv.versions,
                inv.used_bytes,
                needed,
                limit,
                &pins,
                next_use,
            ) {
                Ok(evict) if evict.is_empty() => return Ok(()),
                Ok(evict) => evict,
                Err(e) => {
                    let order = eviction_order(&inv.versions, &pins, next_use);
                    let upper: u64 = order.iter().map(|v| v.bytes).sum();
                    match order.first() {
                        Some(v) if limit.saturating_sub(inv.used_bytes) + upper >= needed => {
                            vec![(v.name.clone(), v.version.clone())]
                        }
                        _ => return Err(e),
                    }
                }
            };
            for (name, version) in evict {
                tracing::info!(name, version, "removing a cached version to make room");
                if !self.remove_unless_in_use(&name, &version)? {
                    pins.insert((name, version));
                }
            }
            self.report_inventory();
        }
    }

    fn stage(&self, order: &StageOrder) -> Result<Vec<Staged>, StageFailure> {
        // Every failure names the dataset and says what to do.
        let failed_item = |item: &StageItem, e: CacheError| {
            StageFailure::Failed(format!(
                "dataset {}: {e}; check its source {} (after changing it, an admin runs `labpool dataset rescan {}`), then submit again",
                item.name,
                item.source.display(),
                item.name
            ))
        };
        let mut manifests = Vec::new();
        let mut needed = 0;
        for item in &order.items {
            let m = Manifest::load(&item.manifest).map_err(|e| failed_item(item, e))?;
            needed += self
                .cache
                .bytes_to_stage(&item.name, &item.version, &m)
                .map_err(|e| failed_item(item, e))?;
            manifests.push(m);
        }
        let pins = self.pins(order);
        let next_use: BTreeMap<_, _> = order.next_use.iter().cloned().collect();
        let inv = self
            .cache
            .inventory()
            .map_err(|e| StageFailure::Failed(e.to_string()))?;
        // Older versions of the datasets being staged are what unchanged files come from
        // (linked, or taken over): they stay while room is made.
        let mut keep = pins.clone();
        for v in inv.versions.iter().filter(|v| v.complete) {
            if order.items.iter().any(|i| i.name == v.name) {
                keep.insert((v.name.clone(), v.version.clone()));
            }
        }
        // A prefetch takes room only from data no queued job reads sooner.
        if matches!(order.purpose, StageFor::Prefetch { .. }) {
            let first_read = order
                .items
                .iter()
                .filter_map(|i| next_use.get(&(i.name.clone(), i.version.clone())))
                .min()
                .copied()
                .unwrap_or(usize::MAX);
            for v in &inv.versions {
                let key = (v.name.clone(), v.version.clone());
                if !prefetch_may_evict(next_use.get(&key).copied(), first_read) {
                    keep.insert(key);
                }
            }
        }
        self.make_room(needed, self.capacity, &keep, &next_use)
            .map_err(|e| StageFailure::NoRoom(e.to_string()))?;
        let mut out = Vec::new();
        for (item, manifest) in order.items.iter().zip(&manifests) {
            // An older version no job needs is taken over: only changed files are written.
            let take_over = inv
                .versions
                .iter()
                .filter(|v| v.complete && v.name == item.name)
                .filter(|v| !pins.contains(&(v.name.clone(), v.version.clone())))
                .map(|v| v.version.clone())
                .collect();
            let connector = self.peers.lock().expect("not poisoned").clone();
            let peer = item.peers.first().zip(connector).map(|(p, c)| c.connect(p));
            let options = StageOptions {
                take_over,
                peer,
                ..self.settings.options.clone()
            };
            let last = Mutex::new(Instant::now() - PROGRESS_EVERY);
            let progress = |p: &Progress| {
                let mut last = last.lock().expect("not poisoned");
                if last.elapsed() >= PROGRESS_EVERY || p.files_done == p.files_total {
                    *last = Instant::now();
                    let _ = self.reports.send(AgentReport::Staging {
                        node: self.node.clone(),
                        purpose: order.purpose,
                        name: item.name.clone(),
                        version: item.version.clone(),
                        progress: p.clone(),
                    });
                }
            };
            let report = self
                .cache
                .stage(
                    &item.name,
                    &item.version,
                    manifest,
                    &item.source,
                    &options,
                    &progress,
                )
                .map_err(|e| failed_item(item, e))?;
            let peer = item.peers.first().map_or("-", |p| p.node.as_str());
            tracing::info!(
                name = item.name,
                version = item.version,
                files_copied = report.files_copied,
                bytes_copied = report.bytes_copied,
                files_linked = report.files_linked,
                peer,
                files_from_peer = report.files_from_peer,
                bytes_from_peer = report.bytes_from_peer,
                bytes_to_peer = report.bytes_to_peer,
                files_delta = report.files_delta,
                peer_fallback = report.peer_fallback.as_deref().unwrap_or("-"),
                "staged"
            );
            out.push(Staged {
                name: item.name.clone(),
                version: item.version.clone(),
                report,
            });
        }
        // Above the high watermark, unpinned versions go down to the low one, as far as pins
        // allow; pins are read again, for jobs that started meanwhile.
        let used = self.cache.used_bytes();
        if used as f64 > self.capacity as f64 * self.settings.high_watermark {
            let low = (self.capacity as f64 * self.settings.low_watermark) as u64;
            if let Err(e) = self.make_room(0, low, &self.pins(order), &next_use) {
                tracing::info!("the cache stays above its high watermark: {e}");
            }
        }
        Ok(out)
    }

    fn verify(
        &self,
        sources: &BTreeMap<(String, String), PathBuf>,
    ) -> Result<Vec<(String, String, labpool_cache::store::VerifyReport)>, CacheError> {
        let mut out = Vec::new();
        for v in self.cache.list()?.into_iter().filter(|v| v.complete) {
            let source = sources.get(&(v.name.clone(), v.version.clone()));
            let report = self
                .cache
                .verify(&v.name, &v.version, source.map(PathBuf::as_path))?;
            if !report.mismatched.is_empty() {
                tracing::warn!(
                    name = v.name,
                    version = v.version,
                    mismatched = report.mismatched.len(),
                    repaired = report.repaired.len(),
                    "cache verify found damaged files"
                );
            }
            out.push((v.name, v.version, report));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefetch(job: u64) -> Task {
        Task::Stage(Box::new(StageOrder {
            purpose: StageFor::Prefetch { job },
            items: Vec::new(),
            pinned: Vec::new(),
            next_use: Vec::new(),
        }))
    }

    #[test]
    fn a_placed_jobs_queued_prefetches_are_dropped_and_reported_first() {
        let dir = tempfile::tempdir().unwrap();
        // No worker thread: the queue is looked at as the worker would find it.
        let stager = Stager {
            queue: Arc::default(),
            in_use: Arc::default(),
            cache: NodeCache::open(dir.path()).unwrap(),
            peers: Arc::default(),
        };
        stager.push(prefetch(7), false);
        stager.push(prefetch(8), false);
        stager.push(prefetch(7), false);
        stager.drop_prefetch(7);
        let q = stager.queue.0.lock().unwrap();
        let kept: Vec<StageFor> = q
            .background
            .iter()
            .map(|t| match t {
                Task::Stage(o) => o.purpose,
                _ => panic!("only stages were queued"),
            })
            .collect();
        assert_eq!(kept, vec![StageFor::Prefetch { job: 8 }]);
        let dropped = q
            .urgent
            .iter()
            .filter(|t| matches!(t, Task::Dropped(o) if o.purpose == StageFor::Prefetch { job: 7 }))
            .count();
        assert_eq!((dropped, q.urgent.len()), (2, 2));
    }
}
