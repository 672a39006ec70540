//! `create`: backs a directory up into the repository.
//!
//! Directories are walked in parallel (rayon). A file whose inode, size, mtime and ctime match
//! the parent snapshot reuses its chunk list unread; any other file is read once with O_NOATIME
//! (so a backup never resets the scratch purge clock), cut into content-defined chunks
//! (FastCDC), and only chunks the repository lacks are compressed and packed.

use crate::blob::{self, BlobId, BlobKind};
use crate::error::{Result, SnapshotError};
use crate::pack::{PackBuilder, WrittenPack};
use crate::progress::Progress;
use crate::repo::{LockMode, Repository};
use crate::snapshot::Snapshot;
use crate::tree::{Node, NodeKind, Tree};
use chrono::{DateTime, Utc};
use globset::{Glob, GlobSet, GlobSetBuilder};
use rayon::prelude::*;
use std::collections::HashSet;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What to back up, and how.
#[derive(Debug, Clone)]
pub struct BackupOptions {
    /// Source name for the record (`datasets`, `home`, or `path`).
    pub source: String,
    /// The directory to back up.
    pub path: PathBuf,
    /// Glob patterns (relative to `path`, or a bare name) to leave out.
    pub excludes: Vec<String>,
    /// Stay on the file system of `path`: mount points are recorded, their contents are not.
    pub one_file_system: bool,
    /// The host name for the record.
    pub host: String,
    /// The backup's time (the caller's clock).
    pub time: DateTime<Utc>,
}

/// A finished backup.
#[derive(Debug)]
pub struct BackupReport {
    /// The new snapshot.
    pub snapshot: Snapshot,
    /// What could not be read, one line each (at most 100).
    pub warnings: Vec<String>,
}

/// Backs `opts.path` up. Takes the append lock, so two backups never run at once.
pub fn create(
    repo: &Repository,
    opts: &BackupOptions,
    progress: &Progress,
) -> Result<BackupReport> {
    let _lock = repo.lock(LockMode::Append)?;
    // What a killed backup stored is indexed now, so this one reuses it instead of storing it
    // again (a repository opened before that backup was killed has not seen it).
    repo.reconcile()?;
    let root_meta =
        fs::symlink_metadata(&opts.path).map_err(SnapshotError::io("stat", &opts.path))?;
    if !root_meta.is_dir() {
        return Err(SnapshotError::Invalid(format!(
            "{} is not a directory; give the directory to back up",
            opts.path.display()
        )));
    }
    let mut excludes = GlobSetBuilder::new();
    for pat in &opts.excludes {
        excludes.add(Glob::new(pat).map_err(|e| {
            SnapshotError::Invalid(format!("exclude pattern {pat:?} is not a valid glob: {e}"))
        })?);
    }
    let excludes = excludes
        .build()
        .map_err(|e| SnapshotError::Invalid(format!("exclude patterns: {e}")))?;
    let parent = repo
        .snapshots()?
        .into_iter()
        .rev()
        .find(|s| s.source == opts.source && s.path == opts.path);
    if let Some(p) = &parent {
        Progress::add(&progress.total_bytes, p.bytes);
    }
    let parent_tree = match &parent {
        Some(p) => repo.load_tree(&p.tree).ok(),
        None => None,
    };
    let cfg = repo.config();
    let saver = Saver {
        repo,
        seen: Mutex::new(HashSet::new()),
        builder: Mutex::new(PackBuilder::default()),
        written: Mutex::new(Vec::new()),
        progress,
    };
    let walker = Walker {
        saver: &saver,
        excludes,
        root_dev: root_meta.dev(),
        one_fs: opts.one_file_system,
        chunk: (
            cfg.chunk_min as usize,
            cfg.chunk_avg as usize,
            cfg.chunk_max as usize,
        ),
        warnings: Mutex::new(Vec::new()),
        progress,
    };
    let (tree, counts) = walker.dir(&opts.path, Path::new(""), parent_tree)?;
    saver.flush()?;
    let name = opts
        .path
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_else(|| b"root".to_vec());
    let mut root = node_from(name, &root_meta);
    root.subtree = Some(tree);
    let id = BlobId::of(
        format!(
            "{}|{}|{}|{}",
            opts.time.to_rfc3339(),
            opts.source,
            tree.hex(),
            std::process::id()
        )
        .as_bytes(),
    )
    .hex()[..16]
        .to_string();
    let written = std::mem::take(&mut *saver.written.lock().unwrap());
    let snapshot = Snapshot {
        id,
        time: opts.time,
        source: opts.source.clone(),
        path: opts.path.clone(),
        host: opts.host.clone(),
        parent: parent.map(|p| p.id),
        tree,
        root,
        files: counts.files,
        dirs: counts.dirs + 1,
        bytes: counts.bytes,
        added_bytes: written.iter().map(|p| p.size).sum(),
        errors: Progress::get(&progress.errors),
    };
    repo.write_record(&snapshot)?;
    repo.index().commit(&written, Some(&snapshot))?;
    let warnings = walker.warnings.into_inner().unwrap();
    Ok(BackupReport { snapshot, warnings })
}

/// Stores blobs the repository lacks, filling packs.
struct Saver<'a> {
    repo: &'a Repository,
    seen: Mutex<HashSet<BlobId>>,
    builder: Mutex<PackBuilder>,
    written: Mutex<Vec<WrittenPack>>,
    progress: &'a Progress,
}

impl Saver<'_> {
    fn save(&self, kind: BlobKind, data: &[u8]) -> Result<BlobId> {
        let id = BlobId::of(data);
        // Two statements, so the `seen` lock is not held across the index lookup.
        let seen = self.seen.lock().unwrap().contains(&id);
        if seen || self.repo.has_blob(&id)? {
            return Ok(id);
        }
        if !self.seen.lock().unwrap().insert(id) {
            return Ok(id);
        }
        let stored = blob::encode(data);
        Progress::add(&self.progress.added, stored.bytes.len() as u64);
        let full = {
            let mut b = self.builder.lock().unwrap();
            b.add(kind, id, data.len(), &stored.bytes, stored.compressed);
            if b.is_full() {
                Some(std::mem::take(&mut *b))
            } else {
                None
            }
        };
        if let Some(b) = full {
            let w = b.write(&self.repo.packs_dir())?;
            self.written.lock().unwrap().push(w);
        }
        Ok(id)
    }

    fn flush(&self) -> Result<()> {
        let b = std::mem::take(&mut *self.builder.lock().unwrap());
        if !b.is_empty() {
            let w = b.write(&self.repo.packs_dir())?;
            self.written.lock().unwrap().push(w);
        }
        Ok(())
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    files: u64,
    dirs: u64,
    bytes: u64,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.files += o.files;
        self.dirs += o.dirs;
        self.bytes += o.bytes;
    }
}

struct Walker<'a> {
    saver: &'a Saver<'a>,
    excludes: GlobSet,
    root_dev: u64,
    one_fs: bool,
    chunk: (usize, usize, usize),
    warnings: Mutex<Vec<String>>,
    progress: &'a Progress,
}

/// Files up to this size are read whole and chunked in memory; larger ones are streamed.
const READ_WHOLE: u64 = 8 << 20;

impl Walker<'_> {
    fn warn(&self, path: &Path, what: impl std::fmt::Display) {
        Progress::add(&self.progress.errors, 1);
        let mut w = self.warnings.lock().unwrap();
        if w.len() < 100 {
            w.push(format!("{}: {what}", path.display()));
        }
    }

    /// Backs up directory `path` (at `rel` in the snapshot) and returns its tree id.
    fn dir(&self, path: &Path, rel: &Path, parent: Option<Arc<Tree>>) -> Result<(BlobId, Counts)> {
        let mut entries: Vec<(Vec<u8>, PathBuf, Metadata)> = Vec::new();
        match fs::read_dir(path) {
            Ok(rd) => {
                for e in rd {
                    let e = match e {
                        Ok(e) => e,
                        Err(err) => {
                            self.warn(path, err);
                            continue;
                        }
                    };
                    let name = e.file_name().as_bytes().to_vec();
                    let rel_child = rel.join(e.file_name());
                    if self.excludes.is_match(&rel_child) || self.excludes.is_match(e.file_name()) {
                        continue;
                    }
                    match e.path().symlink_metadata() {
                        Ok(m) => entries.push((name, e.path(), m)),
                        Err(err) => self.warn(&e.path(), err),
                    }
                }
            }
            Err(err) => self.warn(path, err),
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let results: Vec<Result<Option<(Node, Counts)>>> = entries
            .into_par_iter()
            .map(|(name, p, m)| {
                let prev = parent.as_ref().and_then(|t| t.get(&name).cloned());
                self.node(name, &p, &rel.join(p.file_name().unwrap()), &m, prev)
            })
            .collect();
        let mut tree = Tree::default();
        let mut counts = Counts::default();
        for r in results {
            if let Some((node, c)) = r? {
                counts.add(c);
                tree.nodes.push(node);
            }
        }
        let id = self.saver.save(BlobKind::Tree, &tree.encode())?;
        Ok((id, counts))
    }

    /// Backs up one entry. `Ok(None)` means it was skipped with a warning.
    fn node(
        &self,
        name: Vec<u8>,
        path: &Path,
        rel: &Path,
        meta: &Metadata,
        prev: Option<Node>,
    ) -> Result<Option<(Node, Counts)>> {
        let mut node = node_from(name, meta);
        let mut counts = Counts::default();
        Progress::add(&self.progress.entries, 1);
        match node.kind {
            NodeKind::Dir => {
                counts.dirs = 1;
                if self.one_fs && meta.dev() != self.root_dev {
                    // A mount point: kept as an empty directory, like `du -x` and restic.
                    node.subtree =
                        Some(self.saver.save(BlobKind::Tree, &Tree::default().encode())?);
                } else {
                    let prev_tree = match prev.as_ref().and_then(|p| p.subtree) {
                        Some(t) if prev.as_ref().unwrap().kind == NodeKind::Dir => {
                            self.saver.repo.load_tree(&t).ok()
                        }
                        _ => None,
                    };
                    let (id, c) = self.dir(path, rel, prev_tree)?;
                    counts.add(c);
                    node.subtree = Some(id);
                }
            }
            NodeKind::Symlink => match fs::read_link(path) {
                Ok(t) => node.target = t.as_os_str().as_bytes().to_vec(),
                Err(e) => {
                    self.warn(path, e);
                    return Ok(None);
                }
            },
            NodeKind::File => {
                counts.files = 1;
                counts.bytes = node.size;
                let unchanged = prev.filter(|p| {
                    p.kind == NodeKind::File
                        && p.inode == node.inode
                        && p.size == node.size
                        && p.mtime_ns == node.mtime_ns
                        && p.ctime_ns == node.ctime_ns
                });
                if let Some(p) = unchanged {
                    node.content = p.content;
                    Progress::add(&self.progress.bytes, node.size);
                } else {
                    match self.file(path, &node) {
                        Ok((content, size)) => {
                            node.content = content;
                            node.size = size;
                            counts.bytes = size;
                        }
                        Err(FileError::Skip(e)) => {
                            self.warn(path, e);
                            return Ok(None);
                        }
                        Err(FileError::Repo(e)) => return Err(e),
                    }
                }
            }
            _ => {}
        }
        Ok(Some((node, counts)))
    }

    /// Reads and stores a file's content; returns its chunk list and the bytes read.
    fn file(&self, path: &Path, node: &Node) -> Result<(Vec<BlobId>, u64), FileError> {
        let f = open_noatime(path).map_err(FileError::Skip)?;
        let m = f.metadata().map_err(FileError::Skip)?;
        if m.ino() != node.inode || !m.is_file() {
            return Err(FileError::Skip(std::io::Error::other(
                "replaced while being backed up",
            )));
        }
        let (min, avg, max) = self.chunk;
        let mut content = Vec::new();
        let mut total = 0u64;
        if node.size <= READ_WHOLE {
            let mut buf = Vec::with_capacity(node.size as usize);
            (&f).take(READ_WHOLE + 1)
                .read_to_end(&mut buf)
                .map_err(FileError::Skip)?;
            if buf.is_empty() {
                return Ok((content, 0));
            }
            for c in fastcdc::v2020::FastCDC::new(&buf, min, avg, max) {
                let data = &buf[c.offset..c.offset + c.length];
                content.push(
                    self.saver
                        .save(BlobKind::Data, data)
                        .map_err(FileError::Repo)?,
                );
            }
            total = buf.len() as u64;
            Progress::add(&self.progress.bytes, total);
        } else {
            // Batches of chunks are hashed and compressed in parallel, in order.
            let mut batch: Vec<Vec<u8>> = Vec::new();
            let mut batch_bytes = 0;
            let stream = fastcdc::v2020::StreamCDC::new(&f, min, avg, max);
            let mut flush = |batch: &mut Vec<Vec<u8>>| -> Result<(), FileError> {
                let ids: Vec<Result<BlobId>> = batch
                    .par_iter()
                    .map(|d| self.saver.save(BlobKind::Data, d))
                    .collect();
                for id in ids {
                    content.push(id.map_err(FileError::Repo)?);
                }
                let n: usize = batch.iter().map(|d| d.len()).sum();
                Progress::add(&self.progress.bytes, n as u64);
                batch.clear();
                Ok(())
            };
            for c in stream {
                let c = c.map_err(|e| FileError::Skip(std::io::Error::other(e.to_string())))?;
                total += c.length as u64;
                batch_bytes += c.length;
                batch.push(c.data);
                if batch_bytes >= 16 << 20 {
                    flush(&mut batch)?;
                    batch_bytes = 0;
                }
            }
            flush(&mut batch)?;
        }
        Ok((content, total))
    }
}

enum FileError {
    /// The file could not be read: skip it with a warning.
    Skip(std::io::Error),
    /// The repository failed: stop.
    Repo(SnapshotError),
}

/// Opens without following a symlink, and without updating atime where the kernel lets us
/// (owner or CAP_FOWNER).
fn open_noatime(path: &Path) -> std::io::Result<File> {
    let open = |extra: i32| {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc_flags::O_NOFOLLOW | extra)
            .open(path)
    };
    match open(libc_flags::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc_flags::EPERM) => open(0),
        r => r,
    }
}

mod libc_flags {
    pub const O_NOFOLLOW: i32 = nix::fcntl::OFlag::O_NOFOLLOW.bits();
    pub const O_NOATIME: i32 = nix::fcntl::OFlag::O_NOATIME.bits();
    pub const EPERM: i32 = nix::errno::Errno::EPERM as i32;
}

/// The node for an entry, from its lstat.
pub(crate) fn node_from(name: Vec<u8>, m: &Metadata) -> Node {
    let ft = m.file_type();
    let kind = if ft.is_dir() {
        NodeKind::Dir
    } else if ft.is_symlink() {
        NodeKind::Symlink
    } else if ft.is_fifo() {
        NodeKind::Fifo
    } else if ft.is_char_device() {
        NodeKind::CharDevice
    } else if ft.is_block_device() {
        NodeKind::BlockDevice
    } else if ft.is_socket() {
        NodeKind::Socket
    } else {
        NodeKind::File
    };
    Node {
        name,
        kind,
        mode: m.mode() & 0o7777,
        uid: m.uid(),
        gid: m.gid(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        size: if kind == NodeKind::File || kind == NodeKind::Symlink {
            m.size()
        } else {
            0
        },
        dev: m.dev(),
        inode: m.ino(),
        links: m.nlink(),
        rdev: m.rdev(),
        content: Vec::new(),
        subtree: None,
        target: Vec::new(),
    }
}
