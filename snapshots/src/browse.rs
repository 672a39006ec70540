//! Reading snapshots without restoring: resolve a path, list a directory, find in which
//! snapshots a path exists, and diff two snapshots.
//!
//! Every function takes `only_uid`: for a member, an entry they did not own in the snapshot is
//! treated as absent, so nobody learns of another user's files from a listing.

use crate::error::{Result, SnapshotError};
use crate::repo::Repository;
use crate::snapshot::Snapshot;
use crate::tree::{Node, NodeKind};
use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// A path's components relative to the snapshot's root, or `None` when the path lies outside it.
pub fn relative(s: &Snapshot, path: &Path) -> Option<Vec<Vec<u8>>> {
    let rest = path.strip_prefix(&s.path).ok()?;
    let mut out = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => out.push(n.as_bytes().to_vec()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// The node at `path` in `s`, if it exists (and, for a member, was theirs).
pub fn lookup(
    repo: &Repository,
    s: &Snapshot,
    path: &Path,
    only_uid: Option<u32>,
) -> Result<Option<Node>> {
    let Some(comps) = relative(s, path) else {
        return Ok(None);
    };
    let mut node = s.root.clone();
    for c in comps {
        let Some(t) = node.subtree.filter(|_| node.kind == NodeKind::Dir) else {
            return Ok(None);
        };
        let tree = repo.load_tree(&t)?;
        match tree.get(&c) {
            Some(n) => node = n.clone(),
            None => return Ok(None),
        }
    }
    if only_uid.is_some_and(|u| u != node.uid) {
        return Ok(None);
    }
    Ok(Some(node))
}

/// One entry of a listing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// Absolute path as it was backed up.
    pub path: String,
    /// `-`, `d`, `l`…
    pub kind: char,
    /// Permission bits.
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Group gid.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Modification time.
    pub mtime: DateTime<Utc>,
    /// Symlink target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Entry {
    fn of(path: &Path, n: &Node) -> Entry {
        Entry {
            path: path.display().to_string(),
            kind: n.kind.letter(),
            mode: n.mode,
            uid: n.uid,
            gid: n.gid,
            size: n.size,
            mtime: Utc.timestamp_nanos(n.mtime_ns),
            target: (n.kind == NodeKind::Symlink)
                .then(|| String::from_utf8_lossy(&n.target).into_owned()),
        }
    }
}

/// Lists `path` in `s`: a directory's entries (all levels when `recursive`), or the file itself.
pub fn ls(
    repo: &Repository,
    s: &Snapshot,
    path: &Path,
    recursive: bool,
    only_uid: Option<u32>,
) -> Result<Vec<Entry>> {
    // A member may walk through a directory they did not own (like /shared/home) and see their
    // own entries in it; the directory itself is looked up without the owner filter.
    let absent = || SnapshotError::NotInSnapshot {
        path: path.display().to_string(),
        within: format!("snapshot {}", &s.id[..8.min(s.id.len())]),
        hint: if relative(s, path).is_some() {
            "; it was not there when that snapshot was taken, or it is not yours (`labpool snapshot find PATH` says which snapshots have it)".to_string()
        } else {
            format!(
                "; that snapshot holds {} only (`labpool snapshot find PATH` says which snapshots have it)",
                s.path.display()
            )
        },
    };
    let node = lookup(repo, s, path, None)?.ok_or_else(absent)?;
    let mut out = Vec::new();
    if node.kind != NodeKind::Dir {
        if only_uid.is_none_or(|u| u == node.uid) {
            out.push(Entry::of(path, &node));
        }
    } else {
        list_dir(repo, &node, path, recursive, only_uid, &mut out)?;
    }
    // For a member, a path with nothing of theirs at or under it is answered as absent, so a
    // listing does not tell them what exists in other users' directories.
    if out.is_empty() && only_uid.is_some_and(|u| u != node.uid) {
        return Err(absent());
    }
    Ok(out)
}

fn list_dir(
    repo: &Repository,
    dir: &Node,
    at: &Path,
    recursive: bool,
    only_uid: Option<u32>,
    out: &mut Vec<Entry>,
) -> Result<()> {
    let Some(t) = dir.subtree else { return Ok(()) };
    let tree = repo.load_tree(&t)?;
    for n in &tree.nodes {
        if only_uid.is_some_and(|u| u != n.uid) {
            continue;
        }
        let p = at.join(std::ffi::OsStr::from_bytes(&n.name));
        out.push(Entry::of(&p, n));
        if recursive && n.kind == NodeKind::Dir {
            list_dir(repo, n, &p, true, only_uid, out)?;
        }
    }
    Ok(())
}

/// Whether a path was in one snapshot.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sighting {
    /// Snapshot id.
    pub snapshot: String,
    /// Snapshot time.
    pub time: DateTime<Utc>,
    /// Whether the path existed.
    pub present: bool,
    /// `-`, `d`… when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<char>,
    /// Size when present (files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Modification time when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtime: Option<DateTime<Utc>>,
}

/// The history of a path across snapshots.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FindReport {
    /// The path asked for.
    pub path: String,
    /// Every snapshot that covers the path, oldest first.
    pub sightings: Vec<Sighting>,
    /// The newest snapshot that holds it.
    pub last_seen: Option<String>,
    /// The first snapshot after `last_seen` that no longer holds it: it disappeared between
    /// the two.
    pub gone_in: Option<String>,
}

/// In which snapshots `path` exists, and when it disappeared.
pub fn find(repo: &Repository, path: &Path, only_uid: Option<u32>) -> Result<FindReport> {
    let mut sightings = Vec::new();
    for s in repo.snapshots()? {
        if relative(&s, path).is_none() {
            continue;
        }
        let node = lookup(repo, &s, path, only_uid)?;
        sightings.push(Sighting {
            snapshot: s.id.clone(),
            time: s.time,
            present: node.is_some(),
            kind: node.as_ref().map(|n| n.kind.letter()),
            size: node.as_ref().map(|n| n.size),
            mtime: node.as_ref().map(|n| Utc.timestamp_nanos(n.mtime_ns)),
        });
    }
    let last = sightings.iter().rposition(|s| s.present);
    let last_seen = last.map(|i| sightings[i].snapshot.clone());
    let gone_in = last
        .and_then(|i| sightings.get(i + 1))
        .map(|s| s.snapshot.clone());
    Ok(FindReport {
        path: path.display().to_string(),
        sightings,
        last_seen,
        gone_in,
    })
}

/// One difference between two snapshots.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Change {
    /// `+` added, `-` removed, `M` changed content or kind, `U` changed metadata only.
    pub what: char,
    /// The path.
    pub path: String,
    /// Size in the first snapshot.
    pub old_size: Option<u64>,
    /// Size in the second snapshot.
    pub new_size: Option<u64>,
}

/// What changed from `a` to `b`. Subtrees with the same id are skipped unread.
pub fn diff(
    repo: &Repository,
    a: &Snapshot,
    b: &Snapshot,
    only_uid: Option<u32>,
) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    let base = if a.path == b.path {
        a.path.clone()
    } else {
        PathBuf::from("/")
    };
    diff_dirs(
        repo,
        a.root.subtree,
        b.root.subtree,
        &base,
        only_uid,
        &mut out,
    )?;
    Ok(out)
}

fn diff_dirs(
    repo: &Repository,
    a: Option<crate::blob::BlobId>,
    b: Option<crate::blob::BlobId>,
    at: &Path,
    only_uid: Option<u32>,
    out: &mut Vec<Change>,
) -> Result<()> {
    if a == b {
        return Ok(());
    }
    let ta = match a {
        Some(t) => repo.load_tree(&t)?.nodes.clone(),
        None => Vec::new(),
    };
    let tb = match b {
        Some(t) => repo.load_tree(&t)?.nodes.clone(),
        None => Vec::new(),
    };
    let mine = |n: &Node| only_uid.is_none_or(|u| u == n.uid);
    let (mut i, mut j) = (0, 0);
    while i < ta.len() || j < tb.len() {
        let ord = match (ta.get(i), tb.get(j)) {
            (Some(x), Some(y)) => x.name.cmp(&y.name),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                whole(repo, &ta[i], at, '-', only_uid, out)?;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                whole(repo, &tb[j], at, '+', only_uid, out)?;
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (x, y) = (&ta[i], &tb[j]);
                let p = at.join(std::ffi::OsStr::from_bytes(&x.name));
                // A directory that was not the member's may hold entries that were.
                if x.kind == NodeKind::Dir && y.kind == NodeKind::Dir {
                    diff_dirs(repo, x.subtree, y.subtree, &p, only_uid, out)?;
                } else if x.kind != y.kind || x.content != y.content || x.target != y.target {
                    if mine(x) || mine(y) {
                        out.push(Change {
                            what: 'M',
                            path: p.display().to_string(),
                            old_size: Some(x.size),
                            new_size: Some(y.size),
                        });
                    }
                } else if (x.mode, x.uid, x.gid, x.mtime_ns) != (y.mode, y.uid, y.gid, y.mtime_ns)
                    && (mine(x) || mine(y))
                {
                    out.push(Change {
                        what: 'U',
                        path: p.display().to_string(),
                        old_size: Some(x.size),
                        new_size: Some(y.size),
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
    Ok(())
}

/// Reports a whole added or removed entry, and everything under it (a member: what was theirs).
fn whole(
    repo: &Repository,
    n: &Node,
    at: &Path,
    what: char,
    only_uid: Option<u32>,
    out: &mut Vec<Change>,
) -> Result<()> {
    let p = at.join(std::ffi::OsStr::from_bytes(&n.name));
    let size = Some(n.size);
    if only_uid.is_none_or(|u| u == n.uid) {
        out.push(Change {
            what,
            path: p.display().to_string(),
            old_size: if what == '-' { size } else { None },
            new_size: if what == '+' { size } else { None },
        });
    }
    if n.kind == NodeKind::Dir
        && let Some(t) = n.subtree
    {
        for c in repo.load_tree(&t)?.nodes.iter() {
            whole(repo, c, &p, what, only_uid, out)?;
        }
    }
    Ok(())
}
