//! `check`: is the repository whole? Structure by default (packs present with the right size
//! and trailer, every snapshot's trees readable, every referenced blob indexed); with
//! `read_data`, every blob is read back and hashed, and damage is traced to the files it hits.

use crate::blob::BlobId;
use crate::error::Result;
use crate::pack;
use crate::progress::Progress;
use crate::repo::{LockMode, Repository};
use crate::tree::NodeKind;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What check found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CheckReport {
    /// Snapshots checked.
    pub snapshots: usize,
    /// Packs checked.
    pub packs: usize,
    /// Distinct trees read.
    pub trees: usize,
    /// Blobs whose data was read and hashed (`read_data`).
    pub blobs_read: u64,
    /// Problems, one line each.
    pub errors: Vec<String>,
    /// Files whose content is damaged: `SNAPSHOT PATH`.
    pub damaged_files: Vec<String>,
}

impl CheckReport {
    /// Whether nothing is wrong.
    pub fn ok(&self) -> bool {
        self.errors.is_empty() && self.damaged_files.is_empty()
    }
}

/// Checks the repository.
pub fn check(repo: &Repository, read_data: bool, progress: &Progress) -> Result<CheckReport> {
    let _lock = repo.lock(LockMode::Append)?;
    let mut r = CheckReport::default();
    for id in repo.reconcile()?.records_unusable {
        r.errors.push(format!(
            "snapshot record {id} cannot be used (unreadable, or its root listing is missing from every pack); \
             it is kept in snapshots/{id}.json"
        ));
    }
    let packs = repo.index().packs()?;
    r.packs = packs.len();
    let on_disk: BTreeSet<String> = repo.pack_files()?.into_iter().collect();
    for id in on_disk.iter().filter(|id| !packs.contains_key(*id)) {
        r.errors.push(format!(
            "pack {id} is not in the index and its trailer does not parse"
        ));
    }
    if read_data {
        Progress::add(&progress.total_bytes, packs.values().sum());
    }
    // Packs are checked in parallel: with --read-data each is read, hashed and decoded whole.
    let mut with_blobs = Vec::with_capacity(packs.len());
    for (id, size) in &packs {
        with_blobs.push((id.clone(), *size, repo.index().blobs_in(id)?));
    }
    let results: Vec<PackCheck> = with_blobs
        .into_par_iter()
        .map(|(id, size, indexed)| check_pack(repo, &id, size, &indexed, read_data, progress))
        .collect();
    let mut bad: HashSet<BlobId> = HashSet::new();
    for c in results {
        r.errors.extend(c.errors);
        r.blobs_read += c.blobs_read;
        bad.extend(c.bad);
    }
    // Trees: each read once, each referenced data blob must be indexed (and undamaged).
    let snapshots = repo.snapshots()?;
    r.snapshots = snapshots.len();
    let mut seen_trees = HashSet::new();
    for s in &snapshots {
        walk(repo, s.tree, &s.path, &s.id, &bad, &mut seen_trees, &mut r)?;
    }
    r.trees = seen_trees.len();
    Ok(r)
}

/// What checking one pack found.
#[derive(Default)]
struct PackCheck {
    errors: Vec<String>,
    bad: Vec<BlobId>,
    blobs_read: u64,
}

/// Checks one pack against what the index says it holds.
fn check_pack(
    repo: &Repository,
    id: &str,
    size: u64,
    indexed: &[pack::PackEntry],
    read_data: bool,
    progress: &Progress,
) -> PackCheck {
    let mut c = PackCheck::default();
    let path = pack::pack_path(&repo.packs_dir(), id);
    let Ok(f) = File::open(&path) else {
        c.errors
            .push(format!("pack {id} is missing ({})", path.display()));
        c.bad.extend(indexed.iter().map(|b| b.id));
        return c;
    };
    let real = f.metadata().map(|m| m.len()).unwrap_or(0);
    if real != size {
        c.errors
            .push(format!("pack {id} is {real} bytes, the index says {size}"));
    }
    match pack::read_trailer(&f, id) {
        Ok(entries) => {
            let listed: HashSet<BlobId> = entries.iter().map(|e| e.id).collect();
            for b in indexed.iter().filter(|b| !listed.contains(&b.id)) {
                c.errors.push(format!(
                    "blob {} is indexed in pack {id} but not in its trailer",
                    b.id.hex()
                ));
                c.bad.push(b.id);
            }
        }
        Err(e) => c.errors.push(e.to_string()),
    }
    if !read_data {
        return c;
    }
    let mut all = Vec::with_capacity(real as usize);
    if let Err(e) = (&f).read_to_end(&mut all) {
        c.errors.push(format!("pack {id}: cannot read: {e}"));
        c.bad.extend(indexed.iter().map(|b| b.id));
        return c;
    }
    if blake3::hash(&all).to_hex().as_str() != id {
        c.errors.push(format!(
            "pack {id} does not match its name (its content changed)"
        ));
    }
    for b in indexed {
        let end = b.offset as usize + b.stored_len as usize;
        let ok =
            end <= all.len() && pack::decode_checked(&all[b.offset as usize..end], id, b).is_ok();
        c.blobs_read += 1;
        if !ok {
            c.errors
                .push(format!("blob {} in pack {id} is damaged", b.id.hex()));
            c.bad.push(b.id);
        }
    }
    Progress::add(&progress.bytes, real);
    c
}

fn walk(
    repo: &Repository,
    tree: BlobId,
    at: &Path,
    snap: &str,
    bad: &HashSet<BlobId>,
    seen: &mut HashSet<BlobId>,
    r: &mut CheckReport,
) -> Result<()> {
    // A tree already walked clean for another snapshot is only re-walked when damage exists,
    // so that every snapshot's damaged files are named.
    if !seen.insert(tree) && bad.is_empty() {
        return Ok(());
    }
    let t = match repo.load_tree(&tree) {
        Ok(t) => t,
        Err(e) => {
            r.errors.push(format!(
                "snapshot {snap}: the listing of {} is unreadable: {e}",
                at.display()
            ));
            r.damaged_files.push(format!("{snap} {}/", at.display()));
            return Ok(());
        }
    };
    for n in &t.nodes {
        let p = at.join(std::ffi::OsStr::from_bytes(&n.name));
        if n.kind == NodeKind::Dir {
            if let Some(s) = n.subtree {
                walk(repo, s, &p, snap, bad, seen, r)?;
            }
            continue;
        }
        let mut damaged = false;
        for c in &n.content {
            if bad.contains(c) {
                damaged = true;
            } else if !repo.has_blob(c)? {
                r.errors.push(format!(
                    "snapshot {snap}: {} needs blob {} which is missing",
                    p.display(),
                    c.hex()
                ));
                damaged = true;
            }
        }
        if damaged {
            r.damaged_files.push(format!("{snap} {}", p.display()));
        }
    }
    Ok(())
}
