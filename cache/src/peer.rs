//! Staging from a peer node instead of the shared source: a node that already holds a complete
//! version serves its files (whole, or as an rsync delta against the receiver's older version),
//! and the receiver checks every file against its BLAKE3 before it takes its final name.
//!
//! Decisions recorded here:
//! - Peers are authenticated nodes of the cluster (the transport signs requests); the data they
//!   send is still never trusted: each file must have the expected BLAKE3.
//! - The expected hash is the controller's manifest's own hash when it has one; only when it has
//!   none is the peer's staged manifest trusted for it. A peer manifest is used only when it
//!   describes the same tree (paths, kinds, sizes, mtimes, modes, link targets) and no hash the
//!   controller knows differs from it; otherwise the whole stage uses the shared source.
//! - A peer that fails once (an I/O error, or a file that has the wrong hash even when sent
//!   whole) is dropped for the rest of the stage, and the stage goes on from the shared source.
//! - Files above [`DeltaOptions::max_delta_bytes`] come from the shared source and are refused
//!   by [`NodeCache::serve_whole`] and [`NodeCache::serve_delta`]: both ends hold them in
//!   memory.
//! - Peer transfers are not held to [`crate::store::StageOptions::bandwidth`], which spares the
//!   shared file server only.
//! - The serving side answers only for regular files listed in a complete version's staged
//!   manifest, by their relative path, opening each component without following symlinks.

use crate::copy::set_mtime;
use crate::delta::{self, DeltaOptions};
use crate::error::CacheError;
use crate::layout::MANIFEST;
use crate::manifest::{Entry, Kind, Manifest, mtime_ns};
use crate::store::NodeCache;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A node that holds complete versions and sends their files.
pub trait PeerSource: Send + Sync {
    /// The peer's name, for messages (a node name).
    fn name(&self) -> &str;
    /// The peer's staged manifest of a complete version (with each file's BLAKE3).
    fn manifest(&self, name: &str, version: &str) -> io::Result<Manifest>;
    /// One file of that version, whole.
    fn whole(&self, name: &str, version: &str, path: &str) -> io::Result<Vec<u8>>;
    /// A delta from the receiver's old file (its rsync `signature`, see [`delta::signature`])
    /// to that file.
    fn delta(&self, name: &str, version: &str, path: &str, signature: &[u8])
    -> io::Result<Vec<u8>>;
}

/// A peer that is another cache on this machine (tests and benchmarks; the network peer wraps
/// the same `serve_*` methods).
#[derive(Debug, Clone)]
pub struct LocalPeer {
    /// The peer's name.
    pub name: String,
    /// Its cache.
    pub cache: NodeCache,
}

impl PeerSource for LocalPeer {
    fn name(&self) -> &str {
        &self.name
    }
    fn manifest(&self, name: &str, version: &str) -> io::Result<Manifest> {
        self.cache
            .serve_manifest(name, version)
            .map_err(io::Error::other)
    }
    fn whole(&self, name: &str, version: &str, path: &str) -> io::Result<Vec<u8>> {
        self.cache
            .serve_whole(name, version, path)
            .map_err(io::Error::other)
    }
    fn delta(
        &self,
        name: &str,
        version: &str,
        path: &str,
        signature: &[u8],
    ) -> io::Result<Vec<u8>> {
        self.cache
            .serve_delta(name, version, path, signature)
            .map_err(io::Error::other)
    }
}

impl NodeCache {
    /// The staged manifest of a complete version, for a peer.
    pub fn serve_manifest(&self, name: &str, version: &str) -> Result<Manifest, CacheError> {
        Ok(self.served(name, version)?.as_ref().clone())
    }

    /// One file of a complete version, whole, for a peer.
    pub fn serve_whole(
        &self,
        name: &str,
        version: &str,
        path: &str,
    ) -> Result<Vec<u8>, CacheError> {
        let (_, data) = self.read_served(name, version, path)?;
        Ok(data)
    }

    /// A delta from a peer's old file (its rsync `signature`) to one file of a complete version.
    pub fn serve_delta(
        &self,
        name: &str,
        version: &str,
        path: &str,
        signature: &[u8],
    ) -> Result<Vec<u8>, CacheError> {
        let (p, data) = self.read_served(name, version, path)?;
        delta::delta(signature, &data).map_err(|e| CacheError::BadSignature {
            path: p,
            message: e.to_string(),
        })
    }

    /// The manifest of a complete version.
    fn served(&self, name: &str, version: &str) -> Result<Arc<Manifest>, CacheError> {
        crate::registry::check_name(name)?;
        check_version(version)?;
        let not_complete = || CacheError::NotComplete {
            name: name.to_string(),
            version: version.to_string(),
        };
        if !self.is_complete(name, version) {
            return Err(not_complete());
        }
        // Parsed once per manifest file: serving many files of a version reads it once.
        Ok(self.read_staged(name, version, MANIFEST)?.whole)
    }

    /// Reads a regular file of a complete version's manifest, refusing anything else. Returns
    /// its path and contents.
    fn read_served(
        &self,
        name: &str,
        version: &str,
        path: &str,
    ) -> Result<(PathBuf, Vec<u8>), CacheError> {
        let m = self.served(name, version)?;
        let refuse = |why: &str| CacheError::NotServed {
            name: name.to_string(),
            version: version.to_string(),
            path: path.to_string(),
            why: why.to_string(),
        };
        let parts: Vec<&str> = path.split('/').collect();
        if parts
            .iter()
            .any(|c| c.is_empty() || *c == "." || *c == ".." || c.contains('\0'))
        {
            return Err(refuse("not a relative path inside the version"));
        }
        // Manifests are sorted by path.
        let e = match m.entries.binary_search_by(|e| e.path.as_str().cmp(path)) {
            Ok(i) => &m.entries[i],
            Err(_) => return Err(refuse("not in its manifest")),
        };
        match e.kind {
            Kind::File => {}
            Kind::Dir => return Err(refuse("a directory")),
            Kind::Symlink => return Err(refuse("a symlink")),
        }
        let limit = DeltaOptions::default().max_delta_bytes;
        if e.size > limit {
            return Err(CacheError::TooLargeForPeer {
                path: path.to_string(),
                size: e.size,
                limit,
            });
        }
        let dir = self.dir(name, version);
        let full = dir.join(path);
        let mut f = open_beneath(&dir, &parts).map_err(|err| match err.raw_os_error() {
            // A symlink or something else than a directory where the manifest has one.
            Some(nix::libc::ELOOP) | Some(nix::libc::ENOTDIR) => {
                refuse("a symlink or under one on this node")
            }
            _ => CacheError::io(&full, err),
        })?;
        let meta = f.metadata().map_err(|err| CacheError::io(&full, err))?;
        if !meta.is_file() || meta.len() != e.size {
            return Err(refuse(
                "no longer the manifest's file on this node (`labpool cache verify` repairs it)",
            ));
        }
        let mut data = Vec::with_capacity(e.size as usize);
        f.read_to_end(&mut data)
            .map_err(|err| CacheError::io(&full, err))?;
        Ok((full, data))
    }
}

/// Opens `dir/parts...` for reading, following no symlink on the way.
fn open_beneath(dir: &Path, parts: &[&str]) -> io::Result<File> {
    let nofollow = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = File::from(openat(
        nix::fcntl::AT_FDCWD,
        dir,
        nofollow | OFlag::O_DIRECTORY,
        Mode::empty(),
    )?);
    let (last, parents) = parts.split_last().expect("a path has a component");
    for p in parents {
        at = File::from(openat(
            &at,
            *p,
            nofollow | OFlag::O_DIRECTORY,
            Mode::empty(),
        )?);
    }
    // Non-blocking: a FIFO planted in the cache must not hang the server.
    Ok(File::from(openat(
        &at,
        *last,
        nofollow | OFlag::O_NONBLOCK,
        Mode::empty(),
    )?))
}

/// A version's name: what a dataset name may be (it becomes a directory name).
fn check_version(version: &str) -> Result<(), CacheError> {
    crate::registry::check_name(version).map_err(|_| CacheError::InvalidVersion {
        version: version.to_string(),
    })
}

/// A peer in use by one stage.
pub(crate) struct PeerStage<'a> {
    peer: &'a dyn PeerSource,
    name: &'a str,
    version: &'a str,
    /// The peer's staged manifest, the same tree as the stage's.
    manifest: Manifest,
    /// The newest other complete version of the dataset here: old files for deltas.
    old: Option<PathBuf>,
    options: DeltaOptions,
    /// Why the peer was dropped, once it was.
    dropped: Mutex<Option<String>>,
    /// Bytes sent to the peer (signatures) and received from it, over all attempts.
    pub(crate) up: AtomicU64,
    pub(crate) down: AtomicU64,
}

/// A file brought over from a peer, written to its `.partial`.
pub(crate) struct Fetched {
    pub(crate) hash: String,
    pub(crate) partial: PathBuf,
    /// Rebuilt from a delta.
    pub(crate) delta: bool,
}

impl<'a> PeerStage<'a> {
    /// The peer, when its manifest of `name`/`version` describes `manifest`'s tree; otherwise
    /// why not.
    pub(crate) fn open(
        cache: &NodeCache,
        peer: &'a dyn PeerSource,
        name: &'a str,
        version: &'a str,
        manifest: &Manifest,
        options: DeltaOptions,
    ) -> Result<PeerStage<'a>, String> {
        let theirs = peer.manifest(name, version).map_err(|e| {
            format!(
                "peer {} could not send its manifest of {name} {version} ({e}); staged from the shared source",
                peer.name()
            )
        })?;
        let differs = if theirs.entries.len() != manifest.entries.len() {
            Some(format!(
                "{} entries, not {}",
                theirs.entries.len(),
                manifest.entries.len()
            ))
        } else {
            theirs
                .entries
                .iter()
                .zip(&manifest.entries)
                .find(|(t, m)| {
                    t.path != m.path
                        || !t.same_metadata(m)
                        || matches!((&t.hash, &m.hash), (Some(a), Some(b)) if a != b)
                })
                .map(|(_, m)| format!("{:?} differs", m.path))
        };
        if let Some(why) = differs {
            return Err(format!(
                "peer {} holds another tree under {name} {version} ({why}); staged from the shared source",
                peer.name()
            ));
        }
        Ok(PeerStage {
            peer,
            name,
            version,
            manifest: theirs,
            old: newest_other(cache, name, version),
            options,
            dropped: Mutex::new(None),
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
        })
    }

    /// Why the peer was dropped mid-stage, if it was.
    pub(crate) fn dropped(&self) -> Option<String> {
        self.dropped.lock().expect("not poisoned").clone()
    }

    /// Brings `e` over from the peer to `dst`'s `.partial` (the entry's mode and mtime, not
    /// synced). `None`: the file comes from the source (too large, no hash to check it by, or
    /// the peer failed, which drops it for the rest of the stage).
    pub(crate) fn fetch(&self, e: &Entry, dst: &Path) -> Result<Option<Fetched>, CacheError> {
        if e.size > self.options.max_delta_bytes || self.dropped().is_some() {
            return Ok(None);
        }
        let theirs = self
            .manifest
            .entries
            .binary_search_by(|x| x.path.cmp(&e.path))
            .ok()
            .and_then(|i| self.manifest.entries[i].hash.as_deref());
        let Some(expected) = e.hash.as_deref().or(theirs) else {
            return Ok(None);
        };
        // The old content is the file already at `dst` (a version taken over keeps its changed
        // files in place until they are replaced), else the same path in the newest other
        // complete version. Only a base for the delta: the result is checked by its hash.
        let candidates = std::iter::once(dst.to_path_buf())
            .chain(self.old.as_ref().map(|dir| dir.join(&e.path)));
        let old = candidates.into_iter().find_map(|p| {
            let mut f = OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
                .open(p)
                .ok()?;
            let meta = f.metadata().ok()?;
            if !meta.is_file() || meta.len() > self.options.max_delta_bytes {
                return None;
            }
            let mut buf = Vec::with_capacity(meta.len() as usize);
            f.read_to_end(&mut buf).ok()?;
            Some(buf)
        });
        let at = FileAt {
            stage: self,
            path: &e.path,
        };
        let got = delta::fetch(old.as_deref(), expected, &at, self.options);
        let (bytes, transfer) = match got {
            Ok((bytes, _)) if bytes.len() as u64 != e.size => {
                self.drop_peer(
                    &e.path,
                    &format!("it sent {} bytes, not {}", bytes.len(), e.size),
                );
                return Ok(None);
            }
            Ok(got) => got,
            Err(err) => {
                self.drop_peer(&e.path, &err.to_string());
                return Ok(None);
            }
        };
        let (mut out, partial) = crate::copy::create_partial(dst)?;
        out.write_all(&bytes)
            .and_then(|_| out.set_permissions(std::fs::Permissions::from_mode(e.mode)))
            .map_err(|err| CacheError::io(&partial, err))?;
        set_mtime(&partial, e.mtime_ns)?;
        Ok(Some(Fetched {
            hash: expected.to_string(),
            partial,
            delta: !transfer.whole,
        }))
    }

    fn drop_peer(&self, path: &str, why: &str) {
        self.dropped
            .lock()
            .expect("not poisoned")
            .get_or_insert_with(|| {
                format!(
                    "peer {} failed at {path:?} ({why}); the rest came from the shared source",
                    self.peer.name()
                )
            });
    }
}

/// One file at the peer, as [`delta::fetch`] asks for it; counts the bytes both ways.
struct FileAt<'s, 'a> {
    stage: &'s PeerStage<'a>,
    path: &'s str,
}

impl delta::Peer for FileAt<'_, '_> {
    fn delta(&self, signature: &[u8]) -> io::Result<Vec<u8>> {
        let s = self.stage;
        s.up.fetch_add(signature.len() as u64, Ordering::Relaxed);
        let d = s.peer.delta(s.name, s.version, self.path, signature)?;
        s.down.fetch_add(d.len() as u64, Ordering::Relaxed);
        Ok(d)
    }
    fn whole(&self) -> io::Result<Vec<u8>> {
        let s = self.stage;
        let d = s.peer.whole(s.name, s.version, self.path)?;
        s.down.fetch_add(d.len() as u64, Ordering::Relaxed);
        Ok(d)
    }
}

/// The directory of the most recently completed other version of `name`, if any.
fn newest_other(cache: &NodeCache, name: &str, version: &str) -> Option<PathBuf> {
    std::fs::read_dir(cache.root().join(name))
        .ok()?
        .flatten()
        .filter_map(|d| {
            let v = d
                .file_name()
                .to_str()?
                .strip_suffix(".complete")?
                .to_string();
            (v != version).then_some((mtime_ns(&d.metadata().ok()?), v))
        })
        .max()
        .map(|(_, v)| cache.dir(name, &v))
}
