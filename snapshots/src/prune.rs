//! `forget` and `prune`: drop snapshot records by policy, then remove data nothing references.
//!
//! Prune marks every blob reachable from a snapshot, deletes packs that hold none, and rewrites
//! packs that are mostly garbage (their live blobs copied as stored, not re-compressed). New
//! packs are durable and the index points at them before any old pack is deleted, so a prune
//! killed at any moment loses nothing: at worst an old pack lingers for the next prune.

use crate::blob::BlobId;
use crate::error::Result;
use crate::pack::{self, PackBuilder, WrittenPack};
use crate::progress::Progress;
use crate::repo::{LockMode, Repository};
use crate::retention::{self, Policy, Verdict};
use crate::snapshot::Snapshot;
use crate::tree::NodeKind;
use chrono::FixedOffset;
use serde::Serialize;
use std::collections::HashSet;
use std::os::unix::fs::FileExt;

/// Applies a retention policy: returns the verdicts, and removes the forgotten records unless
/// `dry_run`.
pub fn forget(
    repo: &Repository,
    policy: &Policy,
    tz: FixedOffset,
    dry_run: bool,
) -> Result<Vec<Verdict>> {
    let _lock = if dry_run {
        None
    } else {
        Some(repo.lock(LockMode::Exclusive)?)
    };
    let verdicts = retention::plan(&repo.snapshots()?, policy, tz);
    if !dry_run {
        let gone: Vec<String> = verdicts
            .iter()
            .filter(|v| !v.keep)
            .map(|v| v.snapshot.id.clone())
            .collect();
        repo.remove_records(&gone)?;
    }
    Ok(verdicts)
}

/// What prune did (or would do).
#[derive(Debug, Default, Clone, Serialize)]
pub struct PruneReport {
    /// Packs before.
    pub packs: usize,
    /// Packs deleted outright (nothing in them is used).
    pub packs_deleted: usize,
    /// Packs rewritten (mostly unused).
    pub packs_rewritten: usize,
    /// Packs written to hold the rewritten packs' live blobs.
    pub packs_written: usize,
    /// Bytes of packs before.
    pub bytes_before: u64,
    /// Bytes of packs after.
    pub bytes_after: u64,
    /// Packs left alone because a blob still in use in them is damaged.
    pub damaged_packs: Vec<String>,
}

/// The stored bytes of the live blobs of pack `id`, each verified; `None` when one is damaged
/// or unreadable.
fn live_blobs<'a>(
    repo: &Repository,
    id: &str,
    blobs: &'a [pack::PackEntry],
    used: &HashSet<BlobId>,
) -> Option<Vec<(&'a pack::PackEntry, Vec<u8>)>> {
    let f = repo.pack_file(id).ok()?;
    let mut out = Vec::new();
    for b in blobs.iter().filter(|b| used.contains(&b.id)) {
        let mut stored = vec![0u8; b.stored_len as usize];
        f.read_exact_at(&mut stored, b.offset as u64).ok()?;
        pack::decode_checked(&stored, id, b).ok()?;
        out.push((b, stored));
    }
    Some(out)
}

/// A pack is rewritten when at least this share of it is unused.
const REWRITE_UNUSED_PERCENT: u64 = 20;

/// Every blob id reachable from `snapshots`: their trees and the data those trees list.
pub fn reachable(repo: &Repository, snapshots: &[Snapshot]) -> Result<HashSet<BlobId>> {
    let mut used = HashSet::new();
    let mut todo: Vec<BlobId> = snapshots.iter().map(|s| s.tree).collect();
    while let Some(t) = todo.pop() {
        if !used.insert(t) {
            continue;
        }
        let tree = repo.load_tree(&t)?;
        for n in &tree.nodes {
            used.extend(n.content.iter().copied());
            if n.kind == NodeKind::Dir
                && let Some(s) = n.subtree
            {
                todo.push(s);
            }
        }
    }
    Ok(used)
}

/// Removes unreferenced data.
pub fn prune(repo: &Repository, dry_run: bool, progress: &Progress) -> Result<PruneReport> {
    let _lock = repo.lock(LockMode::Exclusive)?;
    // Packs a killed backup left unindexed are counted (and removed when unused).
    repo.reconcile()?;
    let used = reachable(repo, &repo.snapshots()?)?;
    let packs = repo.index().packs()?;
    let mut report = PruneReport {
        packs: packs.len(),
        bytes_before: packs.values().sum(),
        ..Default::default()
    };
    Progress::add(&progress.total_bytes, report.bytes_before);
    let mut delete = Vec::new();
    let mut rewrite = Vec::new();
    for (id, size) in &packs {
        let blobs = repo.index().blobs_in(id)?;
        let live: u64 = blobs
            .iter()
            .filter(|b| used.contains(&b.id))
            .map(|b| b.stored_len as u64)
            .sum();
        if live == 0 {
            delete.push(id.clone());
        } else if (size - live.min(*size)) * 100 >= size * REWRITE_UNUSED_PERCENT {
            rewrite.push((id.clone(), blobs));
        }
    }
    report.packs_deleted = delete.len();
    report.packs_rewritten = rewrite.len();
    if dry_run {
        let freed: u64 = delete.iter().map(|p| packs[p]).sum();
        report.bytes_after = report.bytes_before - freed;
        return Ok(report);
    }
    let mut written: Vec<WrittenPack> = Vec::new();
    let mut builder = PackBuilder::default();
    let mut rewritten = Vec::new();
    for (id, blobs) in &rewrite {
        // A pack with a damaged live blob is left as it is (copying the blob would hide the
        // damage under a new pack name; dropping it would lose what is left): prune goes on,
        // and `check --read-data` names the files it hits.
        let Some(live) = live_blobs(repo, id, blobs, &used) else {
            report.damaged_packs.push(id.clone());
            continue;
        };
        for (b, stored) in live {
            builder.add(b.kind, b.id, b.raw_len as usize, &stored, b.compressed);
            if builder.is_full() {
                written.push(std::mem::take(&mut builder).write(&repo.packs_dir())?);
            }
        }
        rewritten.push(id.clone());
        Progress::add(&progress.bytes, packs[id]);
    }
    if !builder.is_empty() {
        written.push(builder.write(&repo.packs_dir())?);
    }
    report.packs_written = written.len();
    let removed: Vec<String> = delete
        .iter()
        .cloned()
        .chain(rewritten.iter().cloned())
        .collect();
    repo.index().replace_packs(&written, &removed)?;
    repo.drop_pack_handles();
    for id in &removed {
        let _ = std::fs::remove_file(pack::pack_path(&repo.packs_dir(), id));
    }
    report.packs_rewritten = rewritten.len();
    report.bytes_after = repo.index().packs()?.values().sum();
    Ok(report)
}
