//! The engine's dataset state ([`DataState`]): registered datasets, loaded manifests, node caches
//! as last reported, stages under way, and what staging a version would copy.

use crate::api::agent::StageFor;
use crate::datasets::db::DatasetRow;
use crate::datasets::verify::PendingVerify;
use labpool_cache::manifest::Manifest;
use labpool_cache::store::{Inventory, Progress, bytes_to_stage};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

/// A node cache as its agent last reported it.
#[derive(Debug, Clone, Default)]
pub struct NodeCacheState {
    /// Capacity, bytes.
    pub capacity: u64,
    /// Contents.
    pub inventory: Inventory,
}

/// The engine's dataset state.
#[derive(Default)]
pub struct DataState {
    /// Registered datasets, by name.
    pub datasets: BTreeMap<String, DatasetRow>,
    /// Manifests loaded so far, by (name, version).
    pub(super) manifests: BTreeMap<(String, String), Arc<Manifest>>,
    /// Where manifests are kept.
    pub(super) manifests_dir: PathBuf,
    /// Node caches, by node; absent until the node's agent reports.
    pub caches: BTreeMap<String, NodeCacheState>,
    /// Versions given to staging and running jobs.
    pub job_versions: BTreeMap<u64, Vec<(String, String)>>,
    /// Stages in progress: (node, purpose) → (name, version, progress).
    pub(super) progress: BTreeMap<(String, StageFor), (String, String, Progress)>,
    /// Prefetches and warm-ups sent and not yet done: (node, name, version).
    pub(super) background: BTreeSet<(String, String, String)>,
    /// Versions a stage reported complete on a node since that node's last inventory, which
    /// follows: (node, name, version). Complete meanwhile, so that a pass in between neither
    /// copies them again nor holds a job for them.
    pub(super) landed: BTreeSet<(String, String, String)>,
    /// What the last pass predicted queued jobs will read, by node: version → jobs.
    pub(super) predicted: BTreeMap<String, BTreeMap<(String, String), BTreeSet<u64>>>,
    pub(super) verifies: BTreeMap<u64, PendingVerify>,
    pub(super) next_request: u64,
    /// (node, dataset) whose stage found no room: not placed there again until a job ends or
    /// a stage completes on that node, so a wrong estimate never loops.
    pub(super) blocked: BTreeSet<(String, String)>,
    /// (node, name, version) → why its last background stage failed.
    pub(super) failures: BTreeMap<(String, String, String), String>,
    /// (dataset, version, complete older versions) → bytes to stage: manifests never change, so
    /// this is computed once, not in every pass.
    pub(super) needed_memo: BTreeMap<(String, String, Vec<String>), u64>,
    /// (node, name, version) staged from a peer → the peer serving it.
    pub peer_serving: BTreeMap<(String, String, String), String>,
    /// A multi-node job's stage: (job, attempt) → the nodes still staging, and the notes of
    /// those done. The attempt starts when the last one is done.
    pub(super) gang_stages: BTreeMap<(u64, u32), crate::engine::answers::Answers>,
    /// Bytes per second stages have been copying lately (a moving average of their reports),
    /// for delay scheduling's copy-time estimates; `None` until a stage has reported.
    pub(super) stage_rate: Option<f64>,
    /// Nodes a queued job's prefetch was sent to, until the job is placed.
    pub(crate) prefetched_on: BTreeMap<u64, BTreeSet<String>>,
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

    /// The current version of each named dataset that is staged (not streamed).
    pub(super) fn current(&self, datasets: &[String]) -> Vec<(String, String)> {
        datasets
            .iter()
            .filter(|d| !self.streamed(d))
            .filter_map(|d| Some((d.clone(), self.datasets.get(d)?.current.clone())))
            .collect()
    }

    pub(crate) fn complete_on(&self, node: &str, name: &str, version: &str) -> bool {
        let key = (node.to_string(), name.to_string(), version.to_string());
        self.landed.contains(&key)
            || self.caches.get(node).is_some_and(|c| {
                c.inventory
                    .versions
                    .iter()
                    .any(|v| v.complete && v.name == name && v.version == version)
            })
    }

    pub(super) fn in_flight(&self, node: &str, name: &str, version: &str) -> bool {
        self.background
            .contains(&(node.to_string(), name.to_string(), version.to_string()))
            || self
                .progress
                .iter()
                .any(|((n, _), (d, v, _))| n == node && d == name && v == version)
    }

    /// Bytes that staging `name`'s current version on `node` would copy: none when complete,
    /// only the changed files when an older version is there to link from.
    pub(super) fn needed(&mut self, node: &str, name: &str) -> u64 {
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
