//! A node's dataset cache.
//!
//! ```text
//! ROOT/NAME/VERSION/...            the files, exactly as the manifest lists them
//! ROOT/NAME/VERSION.journal        while staging: one "hash<TAB>path" line per finished file
//! ROOT/NAME/VERSION.manifest.json  once staged: the manifest with each file's BLAKE3
//! ROOT/NAME/VERSION.complete       once staged: the marker; without it a version does not exist
//! ROOT/NAME/VERSION.stats.json     uses, hits and last use
//! ```
//!
//! Versions live apart, so a running job never sees its files change. A file is copied to
//! `.partial`, hashed on the way, synced and renamed; a file unchanged since an older staged
//! version is hard-linked from it instead, and one a peer node holds may come from it (see
//! [`crate::peer`]). A crash mid-stage leaves a version without its marker; staging it again
//! picks up from the journal.

use crate::copy::{Limiter, copy_file, partial_path, set_mtime, write_partial};
use crate::delta::DeltaOptions;
use crate::error::CacheError;
use crate::manifest::{Entry, Kind, Manifest, hash_file};
use crate::peer::{PeerSource, PeerStage, Served};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

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

/// A version in the cache, as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedVersion {
    /// Dataset.
    pub name: String,
    /// Version.
    pub version: String,
    /// Staged completely.
    pub complete: bool,
    /// Bytes of its files.
    pub bytes: u64,
    /// Bytes that only it holds (what removing it frees; the rest is shared by hard links).
    pub unique_bytes: u64,
    /// Files.
    pub files: u64,
    /// Jobs that used it.
    pub uses: u64,
    /// Of those, jobs that found it already staged.
    pub hits: u64,
    /// Last use, ms since the epoch.
    pub last_use_ms: Option<i64>,
}

/// The versions in a cache and the bytes it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// Versions, by name and version.
    pub versions: Vec<CachedVersion>,
    /// Bytes on disk, hard-linked files counted once.
    pub used_bytes: u64,
    /// By dataset: bytes that removing all its versions would free (files its versions share
    /// counted once; files linked from elsewhere not at all).
    #[serde(default)]
    pub datasets: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Stats {
    uses: u64,
    hits: u64,
    last_use_ms: Option<i64>,
}

/// What `verify` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Files checked.
    pub files: u64,
    /// Files whose contents no longer match their hash, or that are missing.
    pub mismatched: Vec<String>,
    /// Of those, files re-staged from the source.
    pub repaired: Vec<String>,
}

/// A node's dataset cache.
#[derive(Debug, Clone)]
pub struct NodeCache {
    root: PathBuf,
    /// Manifests parsed for peers.
    pub(crate) served: Arc<Served>,
}

impl NodeCache {
    /// The cache at `root`, created if missing (readable by all, writable by its owner only).
    pub fn open(root: &Path) -> Result<NodeCache, CacheError> {
        std::fs::create_dir_all(root).map_err(|e| CacheError::io(root, e))?;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| CacheError::io(root, e))?;
        // Versions whose removal a crash interrupted: they were invisible already.
        for name in std::fs::read_dir(root)
            .map_err(|e| CacheError::io(root, e))?
            .flatten()
        {
            for entry in std::fs::read_dir(name.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".removing-")
                {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        Ok(NodeCache {
            root: root.to_path_buf(),
            served: Arc::default(),
        })
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where a version's files are.
    pub fn dir(&self, name: &str, version: &str) -> PathBuf {
        self.root.join(name).join(version)
    }

    pub(crate) fn side(&self, name: &str, version: &str, suffix: &str) -> PathBuf {
        self.root.join(name).join(format!("{version}.{suffix}"))
    }

    /// True when the version is staged completely.
    pub fn is_complete(&self, name: &str, version: &str) -> bool {
        self.side(name, version, "complete").exists()
    }

    /// The staged manifest (with hashes) of a complete version.
    pub fn staged_manifest(&self, name: &str, version: &str) -> Result<Manifest, CacheError> {
        let p = self.side(name, version, "manifest.json");
        let bytes = std::fs::read(&p).map_err(|e| CacheError::io(&p, e))?;
        serde_json::from_slice(&bytes).map_err(|e| CacheError::Corrupt {
            path: p,
            message: e.to_string(),
        })
    }

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
        let mut report = StageReport::default();
        if self.is_complete(name, version) {
            return Ok(report);
        }
        let dir = self.dir(name, version);
        let resuming = dir.exists();
        let mut reused = (0, 0);
        // Files a take-over kept, known good: the workers skip them.
        let mut trusted: BTreeMap<String, String> = BTreeMap::new();
        if !resuming {
            // Of the versions offered, the one with the most files in common.
            let best = opts
                .take_over
                .iter()
                .filter(|v| *v != version && self.is_complete(name, v))
                .filter_map(|v| Some((v, self.staged_manifest(name, v).ok()?)))
                .map(|(v, m)| (kept(&m, manifest).count(), v, m))
                .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)));
            if let Some((_, old, previous)) = best {
                trusted = self.take_over(name, old, &previous, version, manifest)?;
                reused = (
                    trusted.len() as u64,
                    manifest
                        .files()
                        .filter(|e| trusted.contains_key(&e.path))
                        .map(|e| e.size)
                        .sum(),
                );
            }
        }
        std::fs::create_dir_all(&dir).map_err(|e| CacheError::io(&dir, e))?;
        let journal_path = self.side(name, version, "journal");
        // After a take-over the journal holds exactly the trusted files.
        let done = if trusted.is_empty() {
            read_journal(&journal_path)?
        } else {
            BTreeMap::new()
        };
        let donors = self.donors(name, version)?;
        if resuming {
            // Leftovers of an interrupted stage or take-over: copies in progress, and anything
            // the manifest does not hold with that kind (a file where a directory goes now).
            let wanted: BTreeMap<PathBuf, Kind> = manifest
                .entries
                .iter()
                .map(|e| (dir.join(&e.path), e.kind))
                .collect();
            remove_unwanted(&dir, &wanted)?;
        }
        // Directories first (parents before children), then links; files last.
        for e in manifest.entries.iter().filter(|e| e.kind == Kind::Dir) {
            let p = dir.join(&e.path);
            std::fs::create_dir_all(&p).map_err(|err| CacheError::io(&p, err))?;
        }
        for e in manifest.entries.iter().filter(|e| e.kind == Kind::Symlink) {
            let p = dir.join(&e.path);
            let _ = std::fs::remove_file(&p);
            std::os::unix::fs::symlink(e.target.as_deref().unwrap_or(""), &p)
                .map_err(|err| CacheError::io(&p, err))?;
            set_mtime(&p, e.mtime_ns)?;
        }
        let files: Vec<&Entry> = manifest
            .files()
            .filter(|e| !trusted.contains_key(&e.path))
            .collect();
        // The peer's manifest is fetched only when some file is to be copied.
        let to_copy = || {
            files
                .iter()
                .any(|e| !done.contains_key(&e.path) && !donors.contains_key(&DonorKey::of(e)))
        };
        let (peer, mut peer_fallback) = match &opts.peer {
            Some(p) if to_copy() => {
                match PeerStage::open(self, p.as_ref(), name, version, manifest, opts.delta) {
                    Ok(peer) => (Some(peer), None),
                    Err(why) => (None, Some(why)),
                }
            }
            _ => (None, None),
        };
        let total = Progress {
            files_total: files.len() as u64 + reused.0,
            bytes_total: manifest.bytes(),
            ..Progress::default()
        };
        let journal = Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o644)
                .open(&journal_path)
                .map_err(|e| CacheError::io(&journal_path, e))?,
        );
        let limiter = Limiter::new(opts.bandwidth);
        let next = AtomicUsize::new(0);
        // Bytes copied from the source or brought from the peer, for the rate.
        let (files_done, bytes_done, bytes_fetched) = (
            AtomicU64::new(reused.0),
            AtomicU64::new(reused.1),
            AtomicU64::new(0),
        );
        let counts = Mutex::new(report.clone());
        let first_error: Mutex<Option<CacheError>> = Mutex::new(None);
        let started = Instant::now();
        let hashes: Mutex<BTreeMap<String, String>> = Mutex::new(trusted);
        // Copies wait here, written but not yet durable, until a batch is synced and renamed.
        let pending: Mutex<Batch> = Mutex::new(Batch::default());
        let flush = |batch: Batch| -> Result<(), CacheError> {
            if batch.files.is_empty() {
                return Ok(());
            }
            // One sync for the batch instead of one per file: on a disk that takes a
            // millisecond per fsync, per-file syncs cost more than copying small files.
            let d = File::open(&dir).map_err(|e| CacheError::io(&dir, e))?;
            nix::unistd::syncfs(&d).map_err(|e| CacheError::io(&dir, e.into()))?;
            let mut lines = String::new();
            for (partial, dst, path, hash) in batch.files {
                std::fs::rename(&partial, &dst).map_err(|e| CacheError::io(&dst, e))?;
                lines.push_str(&format!("{hash}\t{path}\n"));
            }
            journal
                .lock()
                .expect("not poisoned")
                .write_all(lines.as_bytes())
                .map_err(|e| CacheError::io(&journal_path, e))
        };
        std::thread::scope(|s| {
            for _ in 0..opts.workers.max(1) {
                s.spawn(|| {
                    loop {
                        if first_error.lock().expect("not poisoned").is_some() {
                            return;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(e) = files.get(i) else { return };
                        let dst = dir.join(&e.path);
                        let outcome = self.stage_file(
                            e,
                            &dst,
                            source,
                            &done,
                            &donors,
                            &limiter,
                            peer.as_ref(),
                        );
                        match outcome {
                            Ok((how, hash, partial)) => {
                                {
                                    let mut c = counts.lock().expect("not poisoned");
                                    match how {
                                        How::Resumed => c.files_resumed += 1,
                                        How::Linked => {
                                            c.files_linked += 1;
                                            c.bytes_linked += e.size;
                                        }
                                        How::Copied => {
                                            c.files_copied += 1;
                                            c.bytes_copied += e.size;
                                            bytes_fetched.fetch_add(e.size, Ordering::Relaxed);
                                        }
                                        How::FromPeer { delta } => {
                                            c.files_from_peer += 1;
                                            c.files_delta += u64::from(delta);
                                            bytes_fetched.fetch_add(e.size, Ordering::Relaxed);
                                        }
                                    }
                                }
                                // Links are cheap to make again: only copies are journaled,
                                // once they are durable and in place.
                                if let Some(partial) = partial {
                                    let full = {
                                        let mut b = pending.lock().expect("not poisoned");
                                        b.bytes += e.size;
                                        b.since.get_or_insert_with(Instant::now);
                                        b.files.push((partial, dst, e.path.clone(), hash.clone()));
                                        if b.full() {
                                            Some(std::mem::take(&mut *b))
                                        } else {
                                            None
                                        }
                                    };
                                    if let Some(batch) = full
                                        && let Err(err) = flush(batch)
                                    {
                                        first_error
                                            .lock()
                                            .expect("not poisoned")
                                            .get_or_insert(err);
                                        return;
                                    }
                                }
                                hashes
                                    .lock()
                                    .expect("not poisoned")
                                    .insert(e.path.clone(), hash);
                                let f = files_done.fetch_add(1, Ordering::Relaxed) + 1;
                                let b = bytes_done.fetch_add(e.size, Ordering::Relaxed) + e.size;
                                let secs = started.elapsed().as_secs_f64().max(1e-3);
                                progress(&Progress {
                                    files_done: f,
                                    bytes_done: b,
                                    rate: bytes_fetched.load(Ordering::Relaxed) as f64 / secs,
                                    ..total.clone()
                                });
                            }
                            Err(err) => {
                                first_error.lock().expect("not poisoned").get_or_insert(err);
                                return;
                            }
                        }
                    }
                });
            }
        });
        // Good copies are kept even when another file failed: a later stage resumes them.
        let flushed = flush(pending.into_inner().expect("not poisoned"));
        if let Some(e) = first_error.into_inner().expect("not poisoned") {
            return Err(e);
        }
        flushed?;
        report = counts.into_inner().expect("not poisoned");
        (report.files_reused, report.bytes_reused) = reused;
        if let Some(p) = &peer {
            report.bytes_from_peer = p.down.load(Ordering::Relaxed);
            report.bytes_to_peer = p.up.load(Ordering::Relaxed);
            peer_fallback = p.dropped();
        }
        report.peer_fallback = peer_fallback;
        // Leftovers of an interrupted stage (`.partial` files) are not part of the version.
        // Directory modes and times last: adding files changed their mtimes.
        for e in manifest
            .entries
            .iter()
            .rev()
            .filter(|e| e.kind == Kind::Dir)
        {
            let p = dir.join(&e.path);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(e.mode))
                .map_err(|err| CacheError::io(&p, err))?;
            set_mtime(&p, e.mtime_ns)?;
        }
        let hashes = hashes.into_inner().expect("not poisoned");
        let mut staged = manifest.clone();
        for e in staged.entries.iter_mut().filter(|e| e.kind == Kind::File) {
            e.hash = hashes.get(&e.path).cloned();
        }
        let json = serde_json::to_vec(&staged).expect("a manifest serialises");
        write_atomic(&self.side(name, version, "manifest.json"), &json)?;
        // Everything (the last renames, links, directories) is on disk before the marker is.
        let d = File::open(&dir).map_err(|e| CacheError::io(&dir, e))?;
        nix::unistd::syncfs(&d).map_err(|e| CacheError::io(&dir, e.into()))?;
        write_atomic(&self.side(name, version, "complete"), b"")?;
        let _ = std::fs::remove_file(&journal_path);
        Ok(report)
    }

    /// Turns complete version `old` into the start of `version`: its unchanged files are
    /// journaled as done, it is renamed, and what `manifest` does not hold is removed. Returns
    /// the files kept, with their hashes. `old` stops being complete first, so no job is handed it
    /// half-changed; a crash part-way leaves an incomplete `version` that a later stage
    /// resumes.
    fn take_over(
        &self,
        name: &str,
        old: &str,
        previous: &Manifest,
        version: &str,
        manifest: &Manifest,
    ) -> Result<BTreeMap<String, String>, CacheError> {
        let mut journal = String::new();
        let mut trusted = BTreeMap::new();
        for (e, hash) in kept(previous, manifest) {
            journal.push_str(&format!("{hash}\t{}\n", e.path));
            trusted.insert(e.path.clone(), hash.to_string());
        }
        write_atomic(&self.side(name, version, "journal"), journal.as_bytes())?;
        std::fs::remove_file(self.side(name, old, "complete"))
            .map_err(|e| CacheError::io(&self.side(name, old, "complete"), e))?;
        let (from, to) = (self.dir(name, old), self.dir(name, version));
        std::fs::rename(&from, &to).map_err(|e| CacheError::io(&from, e))?;
        for suffix in ["manifest.json", "stats.json"] {
            let _ = std::fs::remove_file(self.side(name, old, suffix));
        }
        // What the new version does not hold goes, deepest first.
        let gone: Vec<&Entry> = crate::manifest::pairs(previous, manifest)
            .filter_map(|(o, n)| match (o, n) {
                (Some(o), Some(n)) if n.kind == o.kind => None,
                (o, _) => o,
            })
            .collect();
        for o in gone.into_iter().rev() {
            let p = to.join(&o.path);
            let gone = if o.kind == Kind::Dir {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            match gone {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(CacheError::io(&p, e));
                }
                _ => {}
            }
        }
        Ok(trusted)
    }

    #[allow(clippy::too_many_arguments)]
    fn stage_file(
        &self,
        e: &Entry,
        dst: &Path,
        source: &Path,
        done: &BTreeMap<String, String>,
        donors: &BTreeMap<DonorKey, (PathBuf, String)>,
        limiter: &Limiter,
        peer: Option<&PeerStage>,
    ) -> Result<(How, String, Option<PathBuf>), CacheError> {
        if let Some(hash) = done.get(&e.path)
            && std::fs::symlink_metadata(dst).is_ok_and(|m| m.len() == e.size)
        {
            return Ok((How::Resumed, hash.clone(), None));
        }
        if let Some((donor, hash)) = donors.get(&DonorKey::of(e)) {
            let linked = match std::fs::hard_link(donor, dst) {
                // Left by an interrupted stage: replace it.
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    let _ = std::fs::remove_file(dst);
                    std::fs::hard_link(donor, dst).is_ok()
                }
                r => r.is_ok(),
            };
            if linked {
                return Ok((How::Linked, hash.clone(), None));
            }
        }
        // A peer that fails is dropped, and the file comes from the source.
        if let Some(peer) = peer
            && let Some(f) = peer.fetch(e, dst)?
        {
            return Ok((How::FromPeer { delta: f.delta }, f.hash, Some(f.partial)));
        }
        let (file, partial, hash) = write_partial(&source.join(&e.path), dst, e, limiter)?;
        drop(file);
        if let Some(expected) = &e.hash
            && expected != &hash
        {
            let _ = std::fs::remove_file(&partial);
            return Err(CacheError::SourceChanged {
                path: source.join(&e.path),
                expected: format!("BLAKE3 {expected}"),
            });
        }
        Ok((How::Copied, hash, Some(partial)))
    }

    /// Bytes that staging `manifest` as `name`/`version` would copy from the source: files
    /// neither staged already (a resumed stage) nor linkable from another complete version.
    pub fn bytes_to_stage(
        &self,
        name: &str,
        version: &str,
        manifest: &Manifest,
    ) -> Result<u64, CacheError> {
        if self.is_complete(name, version) {
            return Ok(0);
        }
        let done = read_journal(&self.side(name, version, "journal"))?;
        let donors = self.donors(name, version)?;
        Ok(manifest
            .files()
            .filter(|e| !done.contains_key(&e.path) && !donors.contains_key(&DonorKey::of(e)))
            .map(|e| e.size)
            .sum())
    }

    /// Files of complete older versions of `name`, by what makes them the same file.
    fn donors(
        &self,
        name: &str,
        version: &str,
    ) -> Result<BTreeMap<DonorKey, (PathBuf, String)>, CacheError> {
        let mut out = BTreeMap::new();
        // Only the complete markers are read: listing the whole cache's usage would cost a
        // stat per cached file.
        let mut complete: Vec<String> = std::fs::read_dir(self.root.join(name))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".complete")
                    .map(str::to_string)
            })
            .filter(|v| v != version)
            .collect();
        complete.sort();
        for v in complete {
            let m = self.staged_manifest(name, &v)?;
            let base = self.dir(name, &v);
            for e in m.files() {
                if let Some(h) = &e.hash {
                    out.entry(DonorKey::of(e))
                        .or_insert((base.join(&e.path), h.clone()));
                }
            }
        }
        Ok(out)
    }

    /// Every version in the cache, complete or not, by name and version.
    pub fn list(&self) -> Result<Vec<CachedVersion>, CacheError> {
        Ok(self.inventory()?.versions)
    }

    /// Every version, and the bytes the whole cache holds (hard-linked files counted once,
    /// manifests and journals included), from one walk.
    pub fn inventory(&self) -> Result<Inventory, CacheError> {
        let mut versions = Vec::new();
        let mut seen = BTreeSet::new();
        let mut used = 0;
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .map_err(|e| CacheError::io(&self.root, e))?
            .flatten()
            .filter(|d| d.path().is_dir())
            .filter_map(|d| d.file_name().into_string().ok())
            .collect();
        names.sort();
        let mut datasets = BTreeMap::new();
        for name in names {
            // Inode → (links seen in this dataset, links in all, size).
            let mut inodes: BTreeMap<(u64, u64), (u64, u64, u64)> = BTreeMap::new();
            let dir = self.root.join(&name);
            let mut entries: Vec<(String, bool)> = std::fs::read_dir(&dir)
                .map_err(|e| CacheError::io(&dir, e))?
                .flatten()
                .filter_map(|d| Some((d.file_name().into_string().ok()?, d.path().is_dir())))
                .collect();
            entries.sort();
            for (entry, is_dir) in entries {
                if !is_dir {
                    used += std::fs::symlink_metadata(dir.join(&entry)).map_or(0, |m| m.len());
                    continue;
                }
                if entry.starts_with('.') {
                    continue;
                }
                let version = entry;
                let complete = self.is_complete(&name, &version);
                let (bytes, unique_bytes, files) = usage(
                    &self.dir(&name, &version),
                    &mut seen,
                    &mut used,
                    &mut inodes,
                );
                let stats: Stats = std::fs::read(self.side(&name, &version, "stats.json"))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                versions.push(CachedVersion {
                    name: name.clone(),
                    version,
                    complete,
                    bytes,
                    unique_bytes,
                    files,
                    uses: stats.uses,
                    hits: stats.hits,
                    last_use_ms: stats.last_use_ms,
                });
            }
            let own: u64 = inodes
                .values()
                .filter(|(seen, links, _)| seen == links)
                .map(|(_, _, size)| size)
                .sum();
            datasets.insert(name, own);
        }
        Ok(Inventory {
            versions,
            used_bytes: used,
            datasets,
        })
    }

    /// Records that a job used a version; `hit` when it was staged already.
    pub fn note_use(
        &self,
        name: &str,
        version: &str,
        hit: bool,
        at_ms: i64,
    ) -> Result<(), CacheError> {
        let p = self.side(name, version, "stats.json");
        let mut stats: Stats = std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        stats.uses += 1;
        stats.hits += u64::from(hit);
        stats.last_use_ms = Some(at_ms);
        write_atomic(&p, &serde_json::to_vec(&stats).expect("stats serialise"))
    }

    /// Bytes the whole cache holds (see [`NodeCache::inventory`]); 0 when it cannot be read.
    pub fn used_bytes(&self) -> u64 {
        self.inventory().map_or(0, |i| i.used_bytes)
    }

    /// Removes a version: it disappears at once (renamed away), then its files go.
    pub fn remove(&self, name: &str, version: &str) -> Result<(), CacheError> {
        let _ = std::fs::remove_file(self.side(name, version, "complete"));
        let dir = self.dir(name, version);
        if dir.exists() {
            let trash = self.root.join(name).join(format!(".removing-{version}"));
            std::fs::rename(&dir, &trash).map_err(|e| CacheError::io(&dir, e))?;
            std::fs::remove_dir_all(&trash).map_err(|e| CacheError::io(&trash, e))?;
        }
        for suffix in ["manifest.json", "journal", "stats.json"] {
            let _ = std::fs::remove_file(self.side(name, version, suffix));
        }
        let parent = self.root.join(name);
        if std::fs::read_dir(&parent).is_ok_and(|mut d| d.next().is_none()) {
            let _ = std::fs::remove_dir(&parent);
        }
        Ok(())
    }

    /// Re-hashes a complete version's files against its staged manifest. With `source`, files
    /// that do not match are staged again from it.
    pub fn verify(
        &self,
        name: &str,
        version: &str,
        source: Option<&Path>,
    ) -> Result<VerifyReport, CacheError> {
        let m = self.staged_manifest(name, version)?;
        let dir = self.dir(name, version);
        let mut report = VerifyReport::default();
        let limiter = Limiter::new(None);
        for e in m.files() {
            report.files += 1;
            let p = dir.join(&e.path);
            let ok = match (&e.hash, hash_file(&p)) {
                (Some(expected), Ok(actual)) => expected == &actual,
                _ => false,
            };
            if ok {
                continue;
            }
            report.mismatched.push(e.path.clone());
            // A hard-linked file is shared with other versions: it is replaced (through its
            // `.partial` and a rename), never written through.
            let repaired = source.is_some_and(|src| {
                copy_file(&src.join(&e.path), &p, e, &limiter)
                    .is_ok_and(|hash| Some(&hash) == e.hash.as_ref())
            });
            if repaired {
                report.repaired.push(e.path.clone());
            }
        }
        if report.repaired.len() < report.mismatched.len() {
            // Damage that could not be repaired: the version is no longer complete, so no job
            // is handed it, no new version links from it, and it is staged again when needed.
            let marker = self.side(name, version, "complete");
            std::fs::remove_file(&marker).map_err(|e| CacheError::io(&marker, e))?;
        }
        Ok(report)
    }

    /// Versions to remove so that `needed` more bytes fit within `capacity`: never a pinned one;
    /// first the one whose next use is furthest away (`next_use`: queue position; absent: no
    /// known use), then the largest. Incomplete versions not pinned go first.
    pub fn plan_eviction(
        &self,
        needed: u64,
        capacity: u64,
        pinned: &BTreeSet<(String, String)>,
        next_use: &BTreeMap<(String, String), usize>,
    ) -> Result<Vec<(String, String)>, CacheError> {
        let versions = self.list()?;
        let used = self.used_bytes();
        plan(&versions, used, needed, capacity, pinned, next_use)
    }
}

/// Bytes that staging `new` would copy when the `donors` (other versions of the same dataset,
/// complete on the node) are there to link from.
pub fn bytes_to_stage(new: &Manifest, donors: &[&Manifest]) -> u64 {
    let have: BTreeSet<DonorKey> = donors
        .iter()
        .flat_map(|m| m.files().map(DonorKey::of))
        .collect();
    new.files()
        .filter(|e| !have.contains(&DonorKey::of(e)))
        .map(|e| e.size)
        .sum()
}

/// Unpinned versions in the order they go: incomplete ones first, then the one whose next use
/// is furthest away (absent: no known use), then the largest.
pub fn eviction_order<'a>(
    versions: &'a [CachedVersion],
    pinned: &BTreeSet<(String, String)>,
    next_use: &BTreeMap<(String, String), usize>,
) -> Vec<&'a CachedVersion> {
    let key = |v: &CachedVersion| (v.name.clone(), v.version.clone());
    let mut candidates: Vec<&CachedVersion> = versions
        .iter()
        .filter(|v| !pinned.contains(&key(v)))
        .collect();
    candidates.sort_by_key(|v| {
        (
            v.complete,
            std::cmp::Reverse(next_use.get(&key(v)).copied().unwrap_or(usize::MAX)),
            std::cmp::Reverse(v.unique_bytes),
            key(v),
        )
    });
    candidates
}

/// The eviction decision, from a listing (pure, for tests and for the controller's view).
pub fn plan(
    versions: &[CachedVersion],
    used: u64,
    needed: u64,
    capacity: u64,
    pinned: &BTreeSet<(String, String)>,
    next_use: &BTreeMap<(String, String), usize>,
) -> Result<Vec<(String, String)>, CacheError> {
    // What must go: the bytes needed plus any overshoot (capacity may have been lowered).
    let to_free = (used + needed).saturating_sub(capacity);
    if to_free == 0 {
        return Ok(Vec::new());
    }
    let key = |v: &CachedVersion| (v.name.clone(), v.version.clone());
    let candidates = eviction_order(versions, pinned, next_use);
    let (mut out, mut freed) = (Vec::new(), 0);
    for v in candidates {
        if freed >= to_free {
            break;
        }
        freed += v.unique_bytes;
        out.push(key(v));
    }
    if freed < to_free {
        let pinned_bytes = versions
            .iter()
            .filter(|v| pinned.contains(&key(v)))
            .map(|v| v.unique_bytes)
            .sum();
        return Err(CacheError::NoRoom {
            needed,
            free: capacity.saturating_sub(used),
            pinned: pinned_bytes,
        });
    }
    Ok(out)
}

/// Files of `new` that `old` (a staged manifest, with hashes) holds unchanged at the same path,
/// with their hashes.
fn kept<'a>(old: &'a Manifest, new: &'a Manifest) -> impl Iterator<Item = (&'a Entry, &'a str)> {
    crate::manifest::pairs(old, new).filter_map(|(o, e)| {
        let (o, e) = (o?, e?);
        (o.kind == Kind::File && e.kind == Kind::File && DonorKey::of(o) == DonorKey::of(e))
            .then_some(())
            .and(o.hash.as_deref())
            .map(|h| (e, h))
    })
}

/// Copies written and not yet synced and renamed: (partial, final path, manifest path, hash).
#[derive(Default)]
struct Batch {
    files: Vec<(PathBuf, PathBuf, String, String)>,
    bytes: u64,
    since: Option<Instant>,
}

impl Batch {
    /// Big or old enough to sync: this bounds what a crash loses and must copy again.
    fn full(&self) -> bool {
        self.files.len() >= BATCH_FILES
            || self.bytes >= BATCH_BYTES
            || self.since.is_some_and(|t| t.elapsed() >= BATCH_AGE)
    }
}

/// A batch is synced and renamed at this many files, bytes or age, whichever comes first.
const BATCH_FILES: usize = 2048;
const BATCH_BYTES: u64 = 256 << 20;
const BATCH_AGE: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Resumed,
    Linked,
    Copied,
    /// Brought over from the peer; `delta`: rebuilt from a delta.
    FromPeer {
        delta: bool,
    },
}

/// What makes a file in an older version usable for a new one: same path, size, mtime, mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct DonorKey(String, u64, i64, u32);

impl DonorKey {
    fn of(e: &Entry) -> DonorKey {
        DonorKey(e.path.clone(), e.size, e.mtime_ns, e.mode)
    }
}

fn read_journal(path: &Path) -> Result<BTreeMap<String, String>, CacheError> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(CacheError::io(path, e)),
    };
    let mut out = BTreeMap::new();
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| CacheError::io(path, e))?;
        // A torn last line (crash while appending) is ignored: that file is done again.
        if let Some((hash, p)) = line.split_once('\t')
            && hash.len() == 64
        {
            out.insert(p.to_string(), hash.to_string());
        }
    }
    Ok(out)
}

/// Removes what under `dir` is not in `wanted` with the same kind; descends only into wanted
/// directories.
fn remove_unwanted(dir: &Path, wanted: &BTreeMap<PathBuf, Kind>) -> Result<(), CacheError> {
    for e in std::fs::read_dir(dir).map_err(|e| CacheError::io(dir, e))? {
        let p = e.map_err(|e| CacheError::io(dir, e))?.path();
        let meta = std::fs::symlink_metadata(&p).map_err(|e| CacheError::io(&p, e))?;
        let kind = if meta.is_dir() {
            Kind::Dir
        } else if meta.file_type().is_symlink() {
            Kind::Symlink
        } else {
            Kind::File
        };
        match wanted.get(&p) {
            Some(k) if *k == kind && kind == Kind::Dir => remove_unwanted(&p, wanted)?,
            Some(k) if *k == kind => {}
            _ if kind == Kind::Dir => {
                std::fs::remove_dir_all(&p).map_err(|e| CacheError::io(&p, e))?
            }
            _ => std::fs::remove_file(&p).map_err(|e| CacheError::io(&p, e))?,
        }
    }
    Ok(())
}

fn walkdir(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(_) => out.push(p),
                Err(_) => {}
            }
        }
    }
    out
}

/// (bytes, bytes held by this tree alone, files) of a version directory; adds the bytes of
/// inodes not in `seen` to `used`.
fn usage(
    dir: &Path,
    seen: &mut BTreeSet<(u64, u64)>,
    used: &mut u64,
    inodes: &mut BTreeMap<(u64, u64), (u64, u64, u64)>,
) -> (u64, u64, u64) {
    let (mut bytes, mut unique, mut files) = (0, 0, 0);
    for p in walkdir(dir) {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if seen.insert((m.dev(), m.ino())) {
            *used += m.len();
        }
        if m.is_file() && !p.to_string_lossy().ends_with(crate::copy::PARTIAL_SUFFIX) {
            bytes += m.len();
            files += 1;
            if m.nlink() == 1 {
                unique += m.len();
            }
            let e = inodes
                .entry((m.dev(), m.ino()))
                .or_insert((0, m.nlink(), m.len()));
            e.0 += 1;
        }
    }
    (bytes, unique, files)
}

/// Writes a file completely or not at all.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    let tmp = partial_path(path);
    let mut f = File::create(&tmp).map_err(|e| CacheError::io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| CacheError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| CacheError::io(path, e))
}
