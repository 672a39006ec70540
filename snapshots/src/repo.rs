//! The repository directory: its config, locks, packs, index and snapshot records, and the reads
//! everything else builds on.
//!
//! ```text
//! REPO/config.json          format version and chunker parameters
//! REPO/packs/XY/<hex>       packs (see `pack`)
//! REPO/packs/tmp/           packs being written
//! REPO/snapshots/<id>.json  snapshot records
//! REPO/index.sqlite         the index (derived; rebuilt by `check --repair-index`)
//! REPO/lock, create.lock    flock(2) locks
//! ```
//!
//! Durability order for a backup: packs (fsync, rename, fsync dir), then the snapshot record
//! file, then the index commit. Opening a repository reconciles whatever a killed process left:
//! packs missing from the index are read back from their trailers (so a killed backup's data is
//! reused by the next one), temporary files go, and records and index are brought into agreement.

use crate::blob::BlobId;
use crate::error::{Result, SnapshotError};
use crate::index::Index;
use crate::pack::{self, WrittenPack};
use crate::snapshot::Snapshot;
use crate::tree::Tree;
use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The repository format this code reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// The repository's config file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoConfig {
    /// Format version.
    pub version: u32,
    /// Random id, to tell repositories apart.
    pub id: String,
    /// Smallest chunk.
    pub chunk_min: u32,
    /// Average chunk.
    pub chunk_avg: u32,
    /// Largest chunk.
    pub chunk_max: u32,
    /// When it was created.
    pub created: DateTime<Utc>,
}

/// Which lock an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Reading (list, ls, find, diff, restore).
    Read,
    /// Adding (create, check): one at a time, readers welcome.
    Append,
    /// Removing (forget, prune): alone.
    Exclusive,
}

/// Held locks; dropping releases them.
pub struct RepoLock {
    _locks: Vec<Flock<File>>,
}

/// An open repository.
pub struct Repository {
    root: PathBuf,
    config: RepoConfig,
    index: Mutex<Index>,
    open_packs: Mutex<HashMap<String, Arc<File>>>,
    trees: Mutex<HashMap<BlobId, Arc<Tree>>>,
}

/// What opening found and repaired.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Packs on disk that the index lacked (from a killed backup), now indexed.
    pub packs_indexed: usize,
    /// Temporary files removed.
    pub temp_removed: usize,
    /// Snapshot records added to or dropped from the index.
    pub records_fixed: usize,
    /// Records that cannot be indexed (unreadable, or their root tree is missing): left in
    /// place for an admin, and reported by `check`.
    pub records_unusable: Vec<String>,
}

const TREE_CACHE: usize = 50_000;

impl Repository {
    /// Creates a new, empty repository at `path` (which must not exist or be empty).
    pub fn init(path: &Path) -> Result<Repository> {
        if path.exists() {
            let non_empty = fs::read_dir(path)
                .map_err(SnapshotError::io("read", path))?
                .next()
                .is_some();
            if non_empty {
                return Err(SnapshotError::Invalid(format!(
                    "{} exists and is not empty; give an empty or new directory for the repository",
                    path.display()
                )));
            }
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(SnapshotError::io("create", path))?;
        for sub in ["packs", "snapshots"] {
            let p = path.join(sub);
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&p)
                .map_err(SnapshotError::io("create", &p))?;
        }
        let config = RepoConfig {
            version: FORMAT_VERSION,
            id: BlobId::of(
                format!("{:?}{}", std::time::SystemTime::now(), std::process::id()).as_bytes(),
            )
            .hex()[..16]
                .to_string(),
            chunk_min: 256 << 10,
            chunk_avg: 1 << 20,
            chunk_max: 4 << 20,
            created: Utc::now(),
        };
        write_durably(
            &path.join("config.json"),
            serde_json::to_string_pretty(&config).unwrap().as_bytes(),
        )?;
        Repository::open(path)
    }

    /// Opens the repository at `path`, reconciling what a killed process left when no backup
    /// is running.
    pub fn open(path: &Path) -> Result<Repository> {
        let cfg_path = path.join("config.json");
        let config: RepoConfig = fs::read(&cfg_path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .map_err(|why| SnapshotError::NotARepository {
                path: path.to_path_buf(),
                why,
            })?;
        if config.version > FORMAT_VERSION {
            return Err(SnapshotError::UnsupportedVersion {
                path: path.to_path_buf(),
                found: config.version,
                supported: FORMAT_VERSION,
            });
        }
        let index = Index::open(&path.join("index.sqlite"))?;
        let repo = Repository {
            root: path.to_path_buf(),
            config,
            index: Mutex::new(index),
            open_packs: Mutex::new(HashMap::new()),
            trees: Mutex::new(HashMap::new()),
        };
        if let Ok(lock) = repo.try_lock_file("create.lock", FlockArg::LockExclusiveNonblock) {
            repo.reconcile()?;
            drop(lock);
        }
        Ok(repo)
    }

    /// The repository directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Its config.
    pub fn config(&self) -> &RepoConfig {
        &self.config
    }

    /// The packs directory.
    pub fn packs_dir(&self) -> PathBuf {
        self.root.join("packs")
    }

    fn records_dir(&self) -> PathBuf {
        self.root.join("snapshots")
    }

    /// The index, locked for this thread.
    pub fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_lock_file(
        &self,
        name: &str,
        arg: FlockArg,
    ) -> std::result::Result<Flock<File>, nix::Error> {
        let path = self.root.join(name);
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| nix::Error::from_raw(e.raw_os_error().unwrap_or(libc_eio())))?;
        Flock::lock(f, arg).map_err(|(_, e)| e)
    }

    /// Takes the locks `mode` needs, without waiting: a busy repository is an error that says
    /// what holds it.
    pub fn lock(&self, mode: LockMode) -> Result<RepoLock> {
        let busy = |what: &str| SnapshotError::Busy {
            path: self.root.clone(),
            what: what.to_string(),
        };
        let mut locks = Vec::new();
        if mode != LockMode::Read {
            locks.push(
                self.try_lock_file("create.lock", FlockArg::LockExclusiveNonblock)
                    .map_err(|_| busy("a backup, check, forget or prune is running"))?,
            );
        }
        let arg = if mode == LockMode::Exclusive {
            FlockArg::LockExclusiveNonblock
        } else {
            FlockArg::LockSharedNonblock
        };
        let what = if mode == LockMode::Exclusive {
            "a restore or listing is reading it"
        } else {
            "a forget or prune is removing data"
        };
        locks.push(self.try_lock_file("lock", arg).map_err(|_| busy(what))?);
        Ok(RepoLock { _locks: locks })
    }

    /// Brings index, packs and records into agreement after a crash. Needs the create lock.
    pub fn reconcile(&self) -> Result<Reconciled> {
        let mut out = Reconciled::default();
        let tmp = self.packs_dir().join("tmp");
        if let Ok(rd) = fs::read_dir(&tmp) {
            for e in rd.flatten() {
                if fs::remove_file(e.path()).is_ok() {
                    out.temp_removed += 1;
                }
            }
        }
        let known = self.index().packs()?;
        let mut found = Vec::new();
        for id in self.pack_files()? {
            if known.contains_key(&id) {
                continue;
            }
            let path = pack::pack_path(&self.packs_dir(), &id);
            let Ok(f) = File::open(&path) else { continue };
            // A pack that does not parse is left for `check` to report.
            if let Ok(entries) = pack::read_trailer(&f, &id) {
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                found.push(WrittenPack { id, size, entries });
            }
        }
        out.packs_indexed = found.len();
        if !found.is_empty() {
            self.index().commit(&found, None)?;
        }
        // Records: the files are the truth; the index follows them.
        let indexed: BTreeSet<String> = self
            .index()
            .snapshots()?
            .into_iter()
            .map(|s| s.id)
            .collect();
        let mut on_disk = BTreeSet::new();
        let dir = self.records_dir();
        for e in fs::read_dir(&dir)
            .map_err(SnapshotError::io("read", &dir))?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                let _ = fs::remove_file(e.path());
                out.temp_removed += 1;
                continue;
            }
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            on_disk.insert(id.to_string());
            if indexed.contains(id) {
                continue;
            }
            // A record is written after every pack it needs, so one whose root tree is not
            // indexed means damage, not a crash: it is kept (and `check` names it), never
            // deleted silently.
            let rec: Option<Snapshot> = fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            let complete = match &rec {
                Some(s) => self.index().lookup(&s.tree)?.is_some(),
                None => false,
            };
            match rec {
                Some(s) if complete => {
                    self.index().commit(&[], Some(&s))?;
                    out.records_fixed += 1;
                }
                _ => out.records_unusable.push(id.to_string()),
            }
        }
        let stale: Vec<String> = indexed.difference(&on_disk).cloned().collect();
        if !stale.is_empty() {
            out.records_fixed += stale.len();
            self.index().remove_snapshots(&stale)?;
        }
        Ok(out)
    }

    /// Names of the pack files on disk.
    pub fn pack_files(&self) -> Result<Vec<String>> {
        let dir = self.packs_dir();
        let mut out = Vec::new();
        for sub in fs::read_dir(&dir)
            .map_err(SnapshotError::io("read", &dir))?
            .flatten()
        {
            let name = sub.file_name();
            let name = name.to_string_lossy();
            if name == "tmp" || name.len() != 2 {
                continue;
            }
            if let Ok(rd) = fs::read_dir(sub.path()) {
                for f in rd.flatten() {
                    let n = f.file_name().to_string_lossy().into_owned();
                    if n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()) {
                        out.push(n);
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// An open handle on pack `id`, shared between readers.
    pub fn pack_file(&self, id: &str) -> Result<Arc<File>> {
        if let Some(f) = self.open_packs.lock().unwrap().get(id) {
            return Ok(f.clone());
        }
        let path = pack::pack_path(&self.packs_dir(), id);
        let f = Arc::new(File::open(&path).map_err(|e| SnapshotError::Corrupt {
            pack: id.to_string(),
            what: format!("cannot open {}: {e}", path.display()),
        })?);
        let mut open = self.open_packs.lock().unwrap();
        if open.len() > 256 {
            open.clear();
        }
        open.insert(id.to_string(), f.clone());
        Ok(f)
    }

    /// Forgets cached pack handles (after prune removed packs).
    pub fn drop_pack_handles(&self) {
        self.open_packs.lock().unwrap().clear();
    }

    /// Reads, decodes and verifies blob `id`.
    pub fn read_blob(&self, id: &BlobId) -> Result<Vec<u8>> {
        let (pack_id, entry) = self
            .index()
            .lookup(id)?
            .ok_or_else(|| SnapshotError::MissingBlob { id: id.hex() })?;
        let f = self.pack_file(&pack_id)?;
        pack::read_blob(&f, &pack_id, &entry)
    }

    /// Whether the repository holds blob `id`.
    pub fn has_blob(&self, id: &BlobId) -> Result<bool> {
        Ok(self.index().lookup(id)?.is_some())
    }

    /// Loads tree `id` (cached).
    pub fn load_tree(&self, id: &BlobId) -> Result<Arc<Tree>> {
        if let Some(t) = self.trees.lock().unwrap().get(id) {
            return Ok(t.clone());
        }
        let t = Arc::new(Tree::decode(&self.read_blob(id)?)?);
        let mut cache = self.trees.lock().unwrap();
        if cache.len() >= TREE_CACHE {
            cache.clear();
        }
        cache.insert(*id, t.clone());
        Ok(t)
    }

    /// Every snapshot, oldest first.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>> {
        self.index().snapshots()
    }

    /// The snapshot named by `selector`: an id or unique id prefix, or `latest`.
    pub fn select(&self, selector: &str) -> Result<Snapshot> {
        let all = self.snapshots()?;
        if selector == "latest" {
            return all
                .last()
                .cloned()
                .ok_or_else(|| SnapshotError::NoSnapshot {
                    selector: selector.to_string(),
                    hint: "; the repository has no snapshots yet".into(),
                });
        }
        let hits: Vec<&Snapshot> = all.iter().filter(|s| s.id.starts_with(selector)).collect();
        match hits.len() {
            1 => Ok(hits[0].clone()),
            0 => Err(SnapshotError::NoSnapshot {
                selector: selector.to_string(),
                hint: "; `labpool snapshot list` shows the ids".into(),
            }),
            n => Err(SnapshotError::Ambiguous {
                prefix: selector.to_string(),
                count: n,
            }),
        }
    }

    /// Writes a snapshot record durably (before the index commit that makes it visible).
    pub fn write_record(&self, s: &Snapshot) -> Result<()> {
        let path = self.records_dir().join(format!("{}.json", s.id));
        write_durably(&path, serde_json::to_string_pretty(s).unwrap().as_bytes())
    }

    /// Removes snapshot records: files first, then the index rows.
    pub fn remove_records(&self, ids: &[String]) -> Result<()> {
        for id in ids {
            let path = self.records_dir().join(format!("{id}.json"));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(SnapshotError::io("remove", &path)(e)),
            }
        }
        pack::sync_dir(&self.records_dir())?;
        self.index().remove_snapshots(ids)
    }

    /// Sets a lost or damaged index aside (as `index.sqlite.broken`) and opens the repository
    /// with a new one, rebuilt from every pack's trailer and every snapshot record.
    pub fn open_rebuilding_index(path: &Path) -> Result<(Repository, Reconciled)> {
        let busy = || SnapshotError::Busy {
            path: path.to_path_buf(),
            what: "another labpool is using it".into(),
        };
        let lock_path = path.join("create.lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(SnapshotError::io("open", &lock_path))?;
        let lock = Flock::lock(f, FlockArg::LockExclusiveNonblock).map_err(|_| busy())?;
        // The journal files first: a kill in between must not leave an old WAL beside a new
        // database.
        for suffix in ["-wal", "-shm", ""] {
            let p = path.join(format!("index.sqlite{suffix}"));
            if p.exists() {
                let aside = path.join(format!("index.sqlite{suffix}.broken"));
                fs::rename(&p, &aside).map_err(SnapshotError::io("rename", &p))?;
            }
        }
        drop(lock);
        let repo = Repository::open(path)?;
        let _lock = repo.lock(LockMode::Append)?;
        let packs_indexed = repo.index().packs()?.len();
        let records_fixed = repo.snapshots()?.len();
        let done = Reconciled {
            packs_indexed,
            records_fixed,
            ..Default::default()
        };
        Ok((repo, done))
    }
}

fn libc_eio() -> i32 {
    5
}

/// Writes `bytes` to `path` via a temporary file, fsync and rename, then fsyncs the directory.
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().expect("a file path has a parent");
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(SnapshotError::io("create", &tmp))?;
    f.write_all(bytes)
        .map_err(SnapshotError::io("write", &tmp))?;
    f.sync_all().map_err(SnapshotError::io("fsync", &tmp))?;
    fs::rename(&tmp, path).map_err(SnapshotError::io("rename", path))?;
    pack::sync_dir(dir)
}
