//! Staging a version into the node cache, in two steps: [`NodeCache::plan_stage`] decides what
//! to do with each file (a [`StagePlan`]), and [`NodeCache::execute_stage`] does it.
//!
//! Planning reads only the cache's side files, so the decision can be shown, counted and tested
//! apart from the copying.

mod execute;
mod plan;
mod take_over;

pub(crate) use take_over::remove_if_there;

use crate::delta::DeltaOptions;
use crate::error::CacheError;
use crate::manifest::Manifest;
use crate::peer::PeerSource;
use crate::store::NodeCache;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

pub use plan::{
    Donor, FileAction, PlanCounts, PlannedFile, StagePlan, TakeOver, Tally, bytes_to_stage,
};

/// How to stage.
#[derive(Clone)]
pub struct StageOptions {
    /// Parallel copy workers.
    pub workers: usize,
    /// Read bandwidth limit, bytes per second.
    pub bandwidth: Option<u64>,
    /// Complete versions of the same dataset that no job needs any more: a new version may take
    /// one over (renamed, then only its changed files replaced) instead of linking every file.
    pub take_over: Vec<String>,
    /// A node that holds the same version complete: files come from it (whole or as deltas
    /// against an older version here) instead of the source, until it fails once.
    pub peer: Option<Arc<dyn PeerSource>>,
    /// Limits of delta transfer from the peer; larger files come from the source.
    pub delta: DeltaOptions,
}

impl Default for StageOptions {
    fn default() -> Self {
        StageOptions {
            workers: 4,
            bandwidth: None,
            take_over: Vec::new(),
            peer: None,
            delta: DeltaOptions::default(),
        }
    }
}

impl std::fmt::Debug for StageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageOptions")
            .field("workers", &self.workers)
            .field("bandwidth", &self.bandwidth)
            .field("take_over", &self.take_over)
            .field("peer", &self.peer.as_ref().map(|p| p.name()))
            .field("delta", &self.delta)
            .finish()
    }
}

/// Where a stage stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Files done (copied, linked or found done).
    pub files_done: u64,
    /// Files in all.
    pub files_total: u64,
    /// Bytes done.
    pub bytes_done: u64,
    /// Bytes in all.
    pub bytes_total: u64,
    /// Bytes per second copied so far (from the source or a peer).
    pub rate: f64,
}

/// What a stage did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageReport {
    /// Files copied from the shared source.
    pub files_copied: u64,
    /// Bytes copied from the shared source.
    pub bytes_copied: u64,
    /// Files hard-linked from an older version.
    pub files_linked: u64,
    /// Bytes of those.
    pub bytes_linked: u64,
    /// Files found already done (a resumed stage).
    pub files_resumed: u64,
    /// Unchanged files kept in place in a version taken over.
    #[serde(default)]
    pub files_reused: u64,
    /// Their bytes.
    #[serde(default)]
    pub bytes_reused: u64,
    /// Files brought over from the peer (whole or from a delta).
    #[serde(default)]
    pub files_from_peer: u64,
    /// Bytes received from the peer: deltas and whole files, failed attempts included.
    #[serde(default)]
    pub bytes_from_peer: u64,
    /// Bytes sent to the peer (signatures of old files).
    #[serde(default)]
    pub bytes_to_peer: u64,
    /// Of the files from the peer, those rebuilt from a delta.
    #[serde(default)]
    pub files_delta: u64,
    /// Why the peer given was not used, or was dropped mid-stage, naming it.
    #[serde(default)]
    pub peer_fallback: Option<String>,
}

impl NodeCache {
    /// Stages `manifest` (version `version` of dataset `name`) from `source`, or from
    /// `opts.peer` where it holds the same version. Idempotent, and resumes a stage a crash
    /// interrupted. `progress` is called as files finish.
    pub fn stage(
        &self,
        name: &str,
        version: &str,
        manifest: &Manifest,
        source: &Path,
        opts: &StageOptions,
        progress: &(dyn Fn(&Progress) + Sync),
    ) -> Result<StageReport, CacheError> {
        let plan = self.plan_stage(name, version, manifest, &opts.take_over)?;
        self.execute_stage(&plan, source, opts, progress)
    }
}
