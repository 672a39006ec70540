//! Datasets in the engine: what is registered, what each node's cache holds, and a placed job's
//! way from PENDING through STAGING to RUNNING.
//!
//! Decisions recorded here:
//! - A job gets the *current* version of each dataset when it is placed; the version is stored
//!   with the job (`job_datasets`), so a restart resumes the same stage and a rescan never
//!   changes data under a running job.
//! - A staging job holds its GPUs, but its clock (time limit, credits, fair-share) starts only
//!   when it is RUNNING. A stage that fails ends the job FAILED without charge; a cache that
//!   cannot make room sends it back to the queue with reason `CacheFull`.
//! - Pins: versions read by running or staging jobs on a node, and versions the pass predicts
//!   a queued job will need there (its prefetches), are never removed to make room.

use crate::agent::protocol::{
    AgentOrder, LaunchDataset, StageFailure, StageFor, StageItem, StageOrder, Staged,
};
use crate::clock::rfc3339;
use crate::controller::dataset_db::DatasetRow;
use crate::controller::engine::Engine;
use crate::controller::error::ApiError;
use crate::data_api::{CacheStatus, CachedVersionView, StagingView, VerifiedVersion, short};
use labpool_cache::manifest::Manifest;
use labpool_cache::store::{Inventory, Progress, VerifyReport, bytes_to_stage};
use labpool_lifecycle::{Event, StageKind};
use labpool_scheduler::JobState;
use labpool_scheduler::cache_view::CacheView;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

fn format_bytes(n: u64) -> String {
    indicatif::HumanBytes(n).to_string()
}
use tokio::sync::oneshot;

/// A node cache as its agent last reported it.
#[derive(Debug, Clone, Default)]
pub struct NodeCacheState {
    /// Capacity, bytes.
    pub capacity: u64,
    /// Contents.
    pub inventory: Inventory,
}

/// A verify waiting for its nodes.
struct PendingVerify {
    waiting: BTreeSet<String>,
    done: Vec<VerifiedVersion>,
    reply: oneshot::Sender<Result<Vec<VerifiedVersion>, ApiError>>,
}

/// The engine's dataset state.
#[derive(Default)]
pub struct DataState {
    /// Registered datasets, by name.
    pub datasets: BTreeMap<String, DatasetRow>,
    /// Manifests loaded so far, by (name, version).
    manifests: BTreeMap<(String, String), Arc<Manifest>>,
    /// Where manifests are kept.
    manifests_dir: PathBuf,
    /// Node caches, by node; absent until the node's agent reports.
    pub caches: BTreeMap<String, NodeCacheState>,
    /// Versions given to staging and running jobs.
    pub job_versions: BTreeMap<u64, Vec<(String, String)>>,
    /// Stages in progress: (node, purpose) → (name, version, progress).
    progress: BTreeMap<(String, StageFor), (String, String, Progress)>,
    /// Prefetches and warm-ups sent and not yet done: (node, name, version).
    background: BTreeSet<(String, String, String)>,
    /// What the last pass predicted queued jobs will read, by node: version → jobs.
    predicted: BTreeMap<String, BTreeMap<(String, String), BTreeSet<u64>>>,
    verifies: BTreeMap<u64, PendingVerify>,
    next_request: u64,
    /// (node, dataset) whose stage found no room: not placed there again until a job ends or
    /// a stage completes on that node, so a wrong estimate never loops.
    blocked: BTreeSet<(String, String)>,
    /// (node, name, version) → why its last background stage failed.
    failures: BTreeMap<(String, String, String), String>,
    /// (dataset, version, complete older versions) → bytes to stage: manifests never change, so
    /// this is computed once, not in every pass.
    needed_memo: BTreeMap<(String, String, Vec<String>), u64>,
    /// (node, name, version) staged from a peer → the peer serving it.
    pub peer_serving: BTreeMap<(String, String, String), String>,
}

impl DataState {
    /// State whose manifests live in `manifests_dir`.
    pub fn new(manifests_dir: PathBuf) -> DataState {
        DataState {
            manifests_dir,
            ..DataState::default()
        }
    }

    /// The file a version's manifest is kept in.
    pub fn manifest_path(&self, name: &str, version: &str) -> PathBuf {
        self.manifests_dir
            .join(name)
            .join(format!("{version}.json"))
    }

    /// A version's manifest, loaded once.
    pub fn manifest(&mut self, name: &str, version: &str) -> Option<Arc<Manifest>> {
        let key = (name.to_string(), version.to_string());
        if let Some(m) = self.manifests.get(&key) {
            return Some(m.clone());
        }
        match Manifest::load(&self.manifest_path(name, version)) {
            Ok(m) => {
                let m = Arc::new(m);
                self.manifests.insert(key, m.clone());
                Some(m)
            }
            Err(e) => {
                tracing::error!(name, version, "cannot load a dataset manifest: {e}");
                None
            }
        }
    }

    /// Room may have come back on `node`.
    pub fn unblock(&mut self, node: &str) {
        self.blocked.retain(|(n, _)| n != node);
    }

    /// Keeps a manifest just written.
    pub fn remember(&mut self, name: &str, manifest: Manifest) {
        let key = (name.to_string(), manifest.version());
        self.manifests.insert(key, Arc::new(manifest));
    }

    /// The current version of each named dataset.
    fn current(&self, datasets: &[String]) -> Vec<(String, String)> {
        datasets
            .iter()
            .filter_map(|d| Some((d.clone(), self.datasets.get(d)?.current.clone())))
            .collect()
    }

    pub(crate) fn complete_on(&self, node: &str, name: &str, version: &str) -> bool {
        self.caches.get(node).is_some_and(|c| {
            c.inventory
                .versions
                .iter()
                .any(|v| v.complete && v.name == name && v.version == version)
        })
    }

    fn in_flight(&self, node: &str, name: &str, version: &str) -> bool {
        self.background
            .contains(&(node.to_string(), name.to_string(), version.to_string()))
            || self
                .progress
                .iter()
                .any(|((n, _), (d, v, _))| n == node && d == name && v == version)
    }

    /// Bytes that staging `name`'s current version on `node` would copy: none when complete,
    /// only the changed files when an older version is there to link from.
    fn needed(&mut self, node: &str, name: &str) -> u64 {
        let Some(current) = self.datasets.get(name).map(|d| d.current.clone()) else {
            return 0;
        };
        if self.complete_on(node, name, &current) {
            return 0;
        }
        let Some(m) = self.manifest(name, &current) else {
            return 0;
        };
        // Inventory order is sorted by version: the key is stable.
        let older: Vec<String> = self
            .caches
            .get(node)
            .map(|c| {
                c.inventory
                    .versions
                    .iter()
                    .filter(|v| v.complete && v.name == name)
                    .map(|v| v.version.clone())
                    .collect()
            })
            .unwrap_or_default();
        let key = (name.to_string(), current, older);
        if let Some(n) = self.needed_memo.get(&key) {
            return *n;
        }
        let donors: Vec<Arc<Manifest>> = key
            .2
            .iter()
            .filter_map(|v| self.manifest(name, v))
            .collect();
        let donors: Vec<&Manifest> = donors.iter().map(|m| m.as_ref()).collect();
        let n = bytes_to_stage(&m, &donors);
        if self.needed_memo.len() >= 4096 {
            self.needed_memo.clear();
        }
        self.needed_memo.insert(key, n);
        n
    }
}

/// What one scheduling pass knows about the caches: fixed before the pass, so that the pass
/// stays a pure function of its inputs.
pub struct PassCacheView {
    /// (node, dataset) → bytes of its current version already there.
    cached: BTreeMap<(String, String), u64>,
    /// (node, dataset) → bytes staging it would copy.
    needed: BTreeMap<(String, String), u64>,
    /// Node → bytes a stage may still use: free space plus unpinned versions, less stages
    /// under way. Absent: the node's cache has not reported yet.
    spare: BTreeMap<String, u64>,
    /// (node, dataset) whose last stage found no room.
    blocked: BTreeSet<(String, String)>,
}

impl CacheView for PassCacheView {
    fn cached_bytes(&self, node: &str, dataset: &str) -> u64 {
        self.cached
            .get(&(node.to_string(), dataset.to_string()))
            .copied()
            .unwrap_or(0)
    }

    fn has_room(&self, node: &str, datasets: &[String]) -> bool {
        if datasets
            .iter()
            .any(|d| self.blocked.contains(&(node.to_string(), d.clone())))
        {
            return false;
        }
        let Some(spare) = self.spare.get(node) else {
            return true;
        };
        let needed: u64 = datasets
            .iter()
            .map(|d| {
                self.needed
                    .get(&(node.to_string(), d.clone()))
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        needed <= *spare
    }
}

impl Engine {
    /// Versions that must stay on `node`: those its staging and running jobs read, and those
    /// the last pass predicted queued jobs will read there.
    fn pins(&self, node: &str) -> BTreeMap<(String, String), BTreeSet<u64>> {
        let mut out: BTreeMap<(String, String), BTreeSet<u64>> = BTreeMap::new();
        for (job, versions) in &self.data.job_versions {
            let here = self
                .jobs
                .job(*job)
                .is_some_and(|r| r.node.as_deref() == Some(node));
            if here {
                for v in versions {
                    out.entry(v.clone()).or_default().insert(*job);
                }
            }
        }
        if let Some(p) = self.data.predicted.get(node) {
            for (v, jobs) in p {
                out.entry(v.clone()).or_default().extend(jobs);
            }
        }
        out
    }

    /// Queue position of the first pending job that reads each current version.
    fn next_use(&self) -> Vec<((String, String), usize)> {
        let mut out: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (i, job) in self.sched.pending().enumerate() {
            for v in self.data.current(&job.datasets) {
                out.entry(v).or_insert(i);
            }
        }
        out.into_iter().collect()
    }

    /// The cache view for the next pass.
    pub(crate) fn pass_cache_view(&mut self) -> PassCacheView {
        let wanted: BTreeSet<String> = self
            .sched
            .pending()
            .flat_map(|j| j.datasets.iter().cloned())
            .collect();
        let nodes: Vec<String> = self.sched.nodes().map(|n| n.name().to_string()).collect();
        let mut view = PassCacheView {
            cached: BTreeMap::new(),
            needed: BTreeMap::new(),
            spare: BTreeMap::new(),
            blocked: self.data.blocked.clone(),
        };
        for node in &nodes {
            for d in &wanted {
                let Some(current) = self.data.datasets.get(d).map(|r| r.current.clone()) else {
                    continue;
                };
                let key = (node.clone(), d.clone());
                let complete = self.data.caches.get(node).and_then(|c| {
                    c.inventory
                        .versions
                        .iter()
                        .find(|v| v.complete && v.name == *d && v.version == current)
                });
                let cached = match complete {
                    Some(v) => v.bytes.max(1),
                    None => self
                        .data
                        .progress
                        .iter()
                        .filter(|((n, _), (name, v, _))| n == node && name == d && *v == current)
                        .map(|(_, (_, _, p))| p.bytes_done)
                        .max()
                        .unwrap_or(0),
                };
                view.cached.insert(key.clone(), cached);
                let needed = self.data.needed(node, d);
                view.needed.insert(key, needed);
            }
            let Some(cache) = self.data.caches.get(node) else {
                continue;
            };
            let pins = self.pins(node);
            // A dataset none of whose versions is pinned can go whole (files its versions
            // share counted once); otherwise only what its unpinned versions hold alone.
            let mut evictable = 0;
            for (name, own) in &cache.inventory.datasets {
                let versions = cache.inventory.versions.iter().filter(|v| v.name == *name);
                let (pinned, free): (Vec<_>, Vec<_>) =
                    versions.partition(|v| pins.contains_key(&(v.name.clone(), v.version.clone())));
                evictable += if pinned.is_empty() {
                    *own
                } else {
                    free.iter().map(|v| v.unique_bytes).sum()
                };
            }
            let under_way: u64 = self
                .data
                .progress
                .iter()
                .filter(|((n, _), _)| n == node)
                .map(|(_, (_, _, p))| p.bytes_total.saturating_sub(p.bytes_done))
                .sum();
            let spare = (cache.capacity + evictable)
                .saturating_sub(cache.inventory.used_bytes)
                .saturating_sub(under_way);
            view.spare.insert(node.clone(), spare);
        }
        view
    }

    /// Notes the pass's prefetch predictions (they pin what they name) and starts the stages
    /// that are not under way yet.
    pub(crate) fn prefetch(&mut self, predictions: Vec<(u64, String, String)>) {
        self.data.predicted.clear();
        if predictions.is_empty() {
            return;
        }
        for (job, node, dataset) in &predictions {
            let Some(current) = self.data.datasets.get(dataset).map(|r| r.current.clone()) else {
                continue;
            };
            self.data
                .predicted
                .entry(node.clone())
                .or_default()
                .entry((dataset.clone(), current))
                .or_default()
                .insert(*job);
        }
        let view = self.pass_cache_view();
        for (job, node, dataset) in predictions {
            // Within the room pins leave: a prefetch never pushes out what others need.
            if !view.has_room(&node, std::slice::from_ref(&dataset)) {
                continue;
            }
            let versions = self.data.current(std::slice::from_ref(&dataset));
            let Some((name, version)) = versions.into_iter().next() else {
                continue;
            };
            if self.data.complete_on(&node, &name, &version)
                || self.data.in_flight(&node, &name, &version)
            {
                continue;
            }
            tracing::info!(
                job,
                node,
                name,
                version,
                "prefetching a queued job's dataset"
            );
            self.send_stage(&node, StageFor::Prefetch { job }, &[(name, version)]);
        }
    }

    /// Sends a stage order for `versions` to `node`'s agent.
    fn send_stage(&mut self, node: &str, purpose: StageFor, versions: &[(String, String)]) {
        let mut items: Vec<StageItem> = Vec::new();
        for (name, version) in versions {
            let Some(source) = self.data.datasets.get(name).map(|d| d.path.clone()) else {
                continue;
            };
            let peers = if self.data.complete_on(node, name, version) {
                Vec::new()
            } else {
                self.peers_for(node, name, version)
            };
            items.push(StageItem {
                name: name.clone(),
                version: version.clone(),
                source,
                manifest: self.data.manifest_path(name, version),
                peers,
            });
        }
        if !matches!(purpose, StageFor::Job { .. }) {
            for i in &items {
                self.data
                    .background
                    .insert((node.to_string(), i.name.clone(), i.version.clone()));
            }
        }
        let order = StageOrder {
            purpose,
            items,
            pinned: self.pins(node).into_keys().collect(),
            next_use: self.next_use(),
        };
        match self.agents.get(node) {
            Some(link) => {
                let _ = link.send(AgentOrder::Stage(Box::new(order)));
            }
            None => tracing::error!(node, "no agent for node"),
        }
    }

    /// The versions a job placed on `node` gets, and whether they are all there already.
    pub(crate) fn placement_versions(
        &self,
        datasets: &[String],
        node: &str,
    ) -> (Vec<(String, String)>, bool) {
        let versions = self.data.current(datasets);
        let complete = versions
            .iter()
            .all(|(n, v)| self.data.complete_on(node, n, v));
        (versions, complete)
    }

    /// After a placed job is recorded STAGING: asks its node to stage what it lacks.
    pub(crate) fn start_staging(&mut self, job: u64, attempt: u32, node: &str) {
        // All of them: a version the last inventory showed complete may have gone since, and
        // staging a complete one costs nothing.
        let versions = self
            .data
            .job_versions
            .get(&job)
            .cloned()
            .unwrap_or_default();
        self.send_stage(node, StageFor::Job { job, attempt }, &versions);
    }

    /// The datasets of a launch: the versions the job was given, and whether they were staged
    /// before it was placed.
    pub(crate) fn launch_datasets(&self, job: u64, hit: bool) -> Vec<LaunchDataset> {
        self.data
            .job_versions
            .get(&job)
            .into_iter()
            .flatten()
            .map(|(name, version)| LaunchDataset {
                name: name.clone(),
                version: version.clone(),
                hit,
            })
            .collect()
    }

    /// A stage made progress: a staging job's reason says how far.
    pub(crate) async fn on_staging(
        &mut self,
        node: String,
        purpose: StageFor,
        name: String,
        version: String,
        progress: Progress,
    ) -> anyhow::Result<()> {
        let detail = describe_progress(&name, &version, &progress);
        self.data
            .progress
            .insert((node, purpose), (name, version, progress));
        if let StageFor::Job { job, attempt } = purpose {
            self.lifecycle(Event::StageProgress {
                job,
                attempt,
                detail,
            });
        }
        Ok(())
    }

    /// A stage ended. A staging job starts, waits again (no room) or fails.
    pub(crate) async fn on_staged(
        &mut self,
        node: String,
        purpose: StageFor,
        versions: Vec<(String, String)>,
        result: Result<Vec<Staged>, StageFailure>,
    ) -> anyhow::Result<()> {
        self.data.progress.remove(&(node.clone(), purpose));
        if result.is_ok() {
            self.data.unblock(&node);
        }
        for (name, version) in versions {
            let key = (node.clone(), name, version);
            self.data.background.remove(&key);
            match &result {
                Ok(_) => {
                    self.data.failures.remove(&key);
                }
                Err(StageFailure::NoRoom(why) | StageFailure::Failed(why)) => {
                    if !matches!(purpose, StageFor::Job { .. }) {
                        self.data.failures.insert(key, why.clone());
                    }
                }
            }
        }
        let (job, attempt) = match purpose {
            StageFor::Job { job, attempt } => (job, attempt),
            StageFor::Prefetch { .. } | StageFor::WarmUp => {
                if let Err(e) = result {
                    tracing::warn!(node, ?purpose, "background stage failed: {e:?}");
                }
                return Ok(());
            }
        };
        let current = self
            .jobs
            .job(job)
            .is_some_and(|r| r.is_current(attempt, JobState::Staging));
        if !current {
            // Cancelled while staging: the data stays cached for the next job.
            return Ok(());
        }
        match result {
            Ok(staged) => {
                let notes = staged
                    .iter()
                    .map(|s| {
                        let r = &s.report;
                        format!(
                            "{}@{} on {node}: copied {} files ({}), linked {} unchanged ({}), reused {} in place ({}), resumed {}",
                            s.name,
                            short(&s.version),
                            r.files_copied,
                            format_bytes(r.bytes_copied),
                            r.files_linked,
                            format_bytes(r.bytes_linked),
                            r.files_reused,
                            format_bytes(r.bytes_reused),
                            r.files_resumed
                        )
                    })
                    .collect();
                let next = self.after_data(job, &node);
                self.lifecycle(Event::Staged {
                    job,
                    attempt,
                    notes,
                    next,
                });
            }
            Err(StageFailure::NoRoom(why)) => {
                if let Some(row) = self.jobs.job(job) {
                    for d in &row.spec.datasets {
                        self.data.blocked.insert((node.clone(), d.clone()));
                    }
                }
                self.lifecycle(Event::StageFailed {
                    job,
                    attempt,
                    why: format!("the cache on {node} cannot take this job's datasets: {why}"),
                    retry: Some("CacheFull".into()),
                });
            }
            Err(StageFailure::Failed(why)) => self.lifecycle(Event::StageFailed {
                job,
                attempt,
                why: format!("staging its datasets on {node} failed: {why}"),
                retry: None,
            }),
        }
        Ok(())
    }

    /// A node reported its cache.
    pub(crate) fn on_inventory(&mut self, node: String, capacity: u64, inventory: Inventory) {
        self.data.caches.insert(
            node,
            NodeCacheState {
                capacity,
                inventory,
            },
        );
    }

    /// Cache status of one node, or all.
    pub(crate) fn cache_status(&self, node: Option<&str>) -> Result<Vec<CacheStatus>, ApiError> {
        if let Some(n) = node
            && !self.sched.nodes().any(|x| x.name() == n)
        {
            return Err(unknown_node(n, &self.sched));
        }
        let mut out = Vec::new();
        for (name, cache) in &self.data.caches {
            if node.is_some_and(|n| n != name) {
                continue;
            }
            let pins = self.pins(name);
            let versions = cache
                .inventory
                .versions
                .iter()
                .map(|v| {
                    let key = (v.name.clone(), v.version.clone());
                    CachedVersionView {
                        current: self
                            .data
                            .datasets
                            .get(&v.name)
                            .is_some_and(|d| d.current == v.version),
                        name: v.name.clone(),
                        version: v.version.clone(),
                        complete: v.complete,
                        bytes: v.bytes,
                        unique_bytes: v.unique_bytes,
                        files: v.files,
                        uses: v.uses,
                        hits: v.hits,
                        last_use: v.last_use_ms.map(rfc3339),
                        pinned_by: pins.get(&key).into_iter().flatten().copied().collect(),
                    }
                })
                .collect();
            let staging = self
                .data
                .progress
                .iter()
                .filter(|((n, _), _)| n == name)
                .map(|((_, purpose), (d, v, p))| StagingView {
                    name: d.clone(),
                    version: v.clone(),
                    purpose: match purpose {
                        StageFor::Job { job, .. } => format!("job {job}"),
                        StageFor::Prefetch { job } => format!("prefetch for job {job}"),
                        StageFor::WarmUp => "warm-up".into(),
                    },
                    progress: p.clone(),
                })
                .collect();
            let queued = self
                .data
                .background
                .iter()
                .filter(|(n, _, _)| n == name)
                .map(|(_, d, v)| format!("{d}@{v}"))
                .collect();
            let failed = self
                .data
                .failures
                .iter()
                .filter(|((n, _, _), _)| n == name)
                .map(|((_, d, v), why)| format!("{d}@{v}: {why}"))
                .collect();
            out.push(CacheStatus {
                node: name.clone(),
                capacity: cache.capacity,
                used_bytes: cache.inventory.used_bytes,
                versions,
                staging,
                queued,
                failed,
            });
        }
        Ok(out)
    }

    /// An admin's warm-up: stage `name`'s current version on `node` (or every node).
    pub(crate) fn warm_up(
        &mut self,
        name: &str,
        node: Option<&str>,
        admin: bool,
    ) -> Result<crate::data_api::StageQueued, ApiError> {
        if !admin {
            return Err(admin_only("cache stage"));
        }
        let Some(current) = self.data.datasets.get(name).map(|d| d.current.clone()) else {
            return Err(unknown_dataset(name, &self.data));
        };
        if let Some(n) = node
            && !self.sched.nodes().any(|x| x.name() == n)
        {
            return Err(unknown_node(n, &self.sched));
        }
        let nodes: Vec<String> = self
            .sched
            .nodes()
            .map(|n| n.name().to_string())
            .filter(|n| node.is_none_or(|want| want == n))
            .collect();
        let mut queued = Vec::new();
        for n in nodes {
            if self.data.complete_on(&n, name, &current) || self.data.in_flight(&n, name, &current)
            {
                continue;
            }
            self.send_stage(&n, StageFor::WarmUp, &[(name.to_string(), current.clone())]);
            queued.push(n);
        }
        Ok(crate::data_api::StageQueued {
            name: name.to_string(),
            version: current,
            nodes: queued,
        })
    }

    /// Starts a verify of one node's cache, or every node's; the answer comes when all have
    /// reported.
    pub(crate) fn start_verify(
        &mut self,
        node: Option<&str>,
        admin: bool,
        reply: oneshot::Sender<Result<Vec<VerifiedVersion>, ApiError>>,
    ) {
        if !admin {
            let _ = reply.send(Err(admin_only("cache verify")));
            return;
        }
        if let Some(n) = node
            && !self.sched.nodes().any(|x| x.name() == n)
        {
            let _ = reply.send(Err(unknown_node(n, &self.sched)));
            return;
        }
        let nodes: BTreeSet<String> = self
            .agents
            .keys()
            .filter(|n| node.is_none_or(|want| want == n.as_str()))
            .cloned()
            .collect();
        // Mismatched files are re-staged from the source only while it still holds that
        // version; otherwise the version is reported and left for eviction.
        let sources: Vec<((String, String), PathBuf)> = self
            .data
            .datasets
            .values()
            .map(|d| ((d.name.clone(), d.current.clone()), d.path.clone()))
            .collect();
        self.data.next_request += 1;
        let request = self.data.next_request;
        for n in &nodes {
            if let Some(link) = self.agents.get(n) {
                let _ = link.send(AgentOrder::Verify {
                    request,
                    sources: sources.clone(),
                });
            }
        }
        self.data.verifies.insert(
            request,
            PendingVerify {
                waiting: nodes,
                done: Vec::new(),
                reply,
            },
        );
    }

    /// A node finished a verify.
    pub(crate) fn on_verified(
        &mut self,
        node: String,
        request: u64,
        result: Result<Vec<(String, String, VerifyReport)>, String>,
    ) {
        let Some(mut pending) = self.data.verifies.remove(&request) else {
            return;
        };
        pending.waiting.remove(&node);
        match result {
            Ok(versions) => pending
                .done
                .extend(
                    versions
                        .into_iter()
                        .map(|(name, version, r)| VerifiedVersion {
                            node: node.clone(),
                            name,
                            version,
                            files: r.files,
                            mismatched: r.mismatched,
                            repaired: r.repaired,
                        }),
                ),
            Err(e) => {
                let _ = pending.reply.send(Err(ApiError::internal(format!(
                    "verify on {node} failed: {e}"
                ))));
                return;
            }
        }
        if pending.waiting.is_empty() {
            let _ = pending.reply.send(Ok(pending.done));
        } else {
            self.data.verifies.insert(request, pending);
        }
    }

    /// Restart: staging jobs resume their stages (the node's journal skips what is done).
    pub(crate) async fn restore_data(&mut self) -> anyhow::Result<()> {
        for d in self.db.datasets().await? {
            self.data.datasets.insert(d.name.clone(), d);
        }
        self.data.job_versions = self.db.active_job_datasets().await?;
        let staging: Vec<(u64, u32, String)> = self
            .jobs
            .jobs()
            .map(|(_, r)| r)
            .filter(|r| r.state == JobState::Staging)
            .filter_map(|r| Some((r.id, r.attempt, r.node.clone()?)))
            .collect();
        for (job, attempt, node) in staging {
            tracing::info!(
                job,
                node,
                "resuming the stage of a job placed before the restart"
            );
            self.outbox.stage(job, attempt, &node, StageKind::Data);
        }
        for link in self.agents.values() {
            let _ = link.send(AgentOrder::Inventory);
        }
        Ok(())
    }
}

/// `imagenet@1a2b3c4d: 45% (1.2 GB of 2.7 GB, 3000 of 10000 files) at 120 MB/s`.
pub fn describe_progress(name: &str, version: &str, p: &Progress) -> String {
    let pct = (p.bytes_done * 100)
        .checked_div(p.bytes_total)
        .unwrap_or(100);
    format!(
        "{name}@{}: {pct}% ({} of {}, {} of {} files) at {}/s",
        short(version),
        format_bytes(p.bytes_done),
        format_bytes(p.bytes_total),
        p.files_done,
        p.files_total,
        format_bytes(p.rate as u64)
    )
}

/// The error for a name that is not registered.
pub fn unknown_dataset(name: &str, data: &DataState) -> ApiError {
    ApiError::not_found(
        format!("no dataset {name:?}"),
        Some(crate::controller::datasets::registered_hint(
            data.datasets.keys().map(String::as_str),
        )),
    )
}

fn unknown_node(name: &str, sched: &labpool_scheduler::Scheduler) -> ApiError {
    let known: Vec<&str> = sched.nodes().map(|n| n.name()).collect();
    ApiError::not_found(
        format!("no node {name:?}"),
        Some(format!("nodes: {}", known.join(", "))),
    )
}

/// The error for a member trying an admin's dataset or cache command.
pub fn admin_only(what: &str) -> ApiError {
    ApiError::forbidden(
        format!("`{what}` is for admins"),
        Some("admins are root and members of admin_group under [controller]".to_string()),
    )
}
