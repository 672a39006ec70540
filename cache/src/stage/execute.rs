//! The second step of a stage: carrying out a [`StagePlan`].
//!
//! Copies are written to `.partial` files, then synced and renamed in batches, and only then
//! journaled, so the journal never names a file that a crash could lose.

use super::plan::{Donor, FileAction, PlannedFile, StagePlan};
use super::{Progress, StageOptions, StageReport};
use crate::copy::{Limiter, set_mtime, write_partial};
use crate::error::CacheError;
use crate::layout::{COMPLETE, JOURNAL, TAKEN, journal_line, write_atomic};
use crate::manifest::{Entry, Kind};
use crate::peer::PeerStage;
use crate::store::NodeCache;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

impl NodeCache {
    /// Carries out `plan` (from [`NodeCache::plan_stage`]) with files from `source`, or from
    /// `opts.peer` where it holds the same version; `opts.take_over` is not read again. A link
    /// that fails becomes a copy, and a resumed file that is gone is done again.
    pub fn execute_stage(
        &self,
        plan: &StagePlan<'_>,
        source: &Path,
        opts: &StageOptions,
        progress: &(dyn Fn(&Progress) + Sync),
    ) -> Result<StageReport, CacheError> {
        let mut report = StageReport::default();
        if plan.complete {
            return Ok(report);
        }
        let (name, version, manifest) = (plan.name.as_str(), plan.version.as_str(), plan.manifest);
        let dir = self.dir(name, version);
        if let Some(t) = &plan.take_over {
            self.take_over(plan, t)?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| CacheError::io(&dir, e))?;
        if plan.resuming {
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
        let counts = plan.counts();
        // The peer's manifest is fetched only when some file is to be copied.
        let (peer, mut peer_fallback) = match &opts.peer {
            Some(p) if counts.copy.files > 0 => {
                match PeerStage::open(self, p.as_ref(), name, version, manifest, opts.delta) {
                    Ok(peer) => (Some(peer), None),
                    Err(why) => (None, Some(why)),
                }
            }
            _ => (None, None),
        };
        let total = Progress {
            files_total: plan.files.len() as u64,
            bytes_total: manifest.bytes(),
            ..Progress::default()
        };
        let journal_path = self.side(name, version, JOURNAL);
        let journal = Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o644)
                .open(&journal_path)
                .map_err(|e| CacheError::io(&journal_path, e))?,
        );
        let limiter = Limiter::new(opts.bandwidth);
        // Bytes copied from the source or brought from the peer, for the rate.
        let (files_done, bytes_done, bytes_fetched) = (
            AtomicU64::new(counts.reuse.files),
            AtomicU64::new(counts.reuse.bytes),
            AtomicU64::new(0),
        );
        let tally = Mutex::new(StageReport::default());
        let started = Instant::now();
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
                lines.push_str(&journal_line(&hash, &path));
            }
            journal
                .lock()
                .expect("not poisoned")
                .write_all(lines.as_bytes())
                .map_err(|e| CacheError::io(&journal_path, e))
        };
        // One file: its hash once it is done (linked, or copied and queued for the next batch).
        let work = |f: &PlannedFile<'_>| -> Result<String, CacheError> {
            let e = f.entry;
            let (resume, donor) = match &f.action {
                FileAction::Reuse { hash } => return Ok(hash.clone()),
                FileAction::Resume { hash, donor } => (Some(hash.as_str()), donor.as_ref()),
                FileAction::Link(d) => (None, Some(d)),
                FileAction::Copy => (None, None),
            };
            let dst = dir.join(&e.path);
            let step = Step {
                resume,
                donor,
                source,
                limiter: &limiter,
                peer: peer.as_ref(),
            };
            let (how, hash, partial) = step.run(e, &dst)?;
            {
                let mut c = tally.lock().expect("not poisoned");
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
            // Links are cheap to make again: only copies are journaled, once they are durable
            // and in place.
            if let Some(partial) = partial {
                let full = {
                    let mut b = pending.lock().expect("not poisoned");
                    b.bytes += e.size;
                    b.since.get_or_insert_with(Instant::now);
                    b.files.push((partial, dst, e.path.clone(), hash.clone()));
                    b.full().then(|| std::mem::take(&mut *b))
                };
                if let Some(batch) = full {
                    flush(batch)?;
                }
            }
            let f = files_done.fetch_add(1, Ordering::Relaxed) + 1;
            let b = bytes_done.fetch_add(e.size, Ordering::Relaxed) + e.size;
            let secs = started.elapsed().as_secs_f64().max(1e-3);
            progress(&Progress {
                files_done: f,
                bytes_done: b,
                rate: bytes_fetched.load(Ordering::Relaxed) as f64 / secs,
                ..total.clone()
            });
            Ok(hash)
        };
        let workers = opts.workers.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("labpool-stage-{i}"))
            .build()
            .map_err(|e| CacheError::Workers {
                workers,
                message: e.to_string(),
            })?;
        // After the first error no new file is started. Files a take-over kept are done.
        let todo: Vec<&PlannedFile<'_>> = plan
            .files
            .iter()
            .filter(|f| !matches!(f.action, FileAction::Reuse { .. }))
            .collect();
        let done: Result<Vec<String>, CacheError> =
            pool.install(|| todo.par_iter().map(|f| work(f)).collect());
        // Good copies are kept even when another file failed: a later stage resumes them.
        let flushed = flush(pending.into_inner().expect("not poisoned"));
        let mut done = done?.into_iter();
        flushed?;
        // Every file's hash, in the plan's order (which is the manifest's).
        let hashes: Vec<String> = plan
            .files
            .iter()
            .map(|f| match &f.action {
                FileAction::Reuse { hash } => Some(hash.clone()),
                _ => done.next(),
            })
            .collect::<Option<_>>()
            .expect("a hash for every file done");
        let tally = tally.into_inner().expect("not poisoned");
        report = StageReport {
            files_reused: counts.reuse.files,
            bytes_reused: counts.reuse.bytes,
            ..tally
        };
        if let Some(p) = &peer {
            report.bytes_from_peer = p.down.load(Ordering::Relaxed);
            report.bytes_to_peer = p.up.load(Ordering::Relaxed);
            peer_fallback = p.dropped();
        }
        report.peer_fallback = peer_fallback;
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
        self.write_staged(name, version, manifest, &hashes, plan.base())?;
        // Everything (the last renames, links, directories) is on disk before the marker is.
        let d = File::open(&dir).map_err(|e| CacheError::io(&dir, e))?;
        nix::unistd::syncfs(&d).map_err(|e| CacheError::io(&dir, e.into()))?;
        write_atomic(&self.side(name, version, COMPLETE), b"")?;
        let _ = std::fs::remove_file(&journal_path);
        let _ = std::fs::remove_file(self.side(name, version, TAKEN));
        Ok(report)
    }
}

/// How one file of a stage was done.
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

/// What one file may be done from, most preferred first.
struct Step<'a> {
    /// Its hash, when the journal lists it as done.
    resume: Option<&'a str>,
    donor: Option<&'a Donor>,
    source: &'a Path,
    limiter: &'a Limiter,
    peer: Option<&'a PeerStage<'a>>,
}

impl Step<'_> {
    /// Does file `e` at `dst`: its hash, and the `.partial` to rename into place for a copy.
    fn run(&self, e: &Entry, dst: &Path) -> Result<(How, String, Option<PathBuf>), CacheError> {
        if let Some(hash) = self.resume
            && std::fs::symlink_metadata(dst).is_ok_and(|m| m.len() == e.size)
        {
            return Ok((How::Resumed, hash.to_string(), None));
        }
        if let Some(donor) = self.donor {
            let linked = match std::fs::hard_link(&donor.path, dst) {
                // Left by an interrupted stage: replace it.
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    let _ = std::fs::remove_file(dst);
                    std::fs::hard_link(&donor.path, dst).is_ok()
                }
                r => r.is_ok(),
            };
            if linked {
                return Ok((How::Linked, donor.hash.clone(), None));
            }
        }
        // A peer that fails is dropped, and the file comes from the source.
        if let Some(peer) = self.peer
            && let Some(f) = peer.fetch(e, dst)?
        {
            return Ok((How::FromPeer { delta: f.delta }, f.hash, Some(f.partial)));
        }
        let src = self.source.join(&e.path);
        let (file, partial, hash) = write_partial(&src, dst, e, self.limiter)?;
        drop(file);
        if let Some(expected) = &e.hash
            && expected != &hash
        {
            let _ = std::fs::remove_file(&partial);
            return Err(CacheError::SourceChanged {
                path: src,
                expected: format!("BLAKE3 {expected}"),
            });
        }
        Ok((How::Copied, hash, Some(partial)))
    }
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
