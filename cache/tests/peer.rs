//! Staging from a peer node: every file can come from it, a changed file travels as a delta,
//! corrupted data is caught by BLAKE3, a peer that fails or holds another tree hands the stage
//! back to the shared source, and the serving side sends only regular files of complete
//! versions.

use labpool_cache::CacheError;
use labpool_cache::delta::{DeltaOptions, signature};
use labpool_cache::manifest::{Manifest, hash_file, rescan, scan};
use labpool_cache::peer::{LocalPeer, PeerSource};
use labpool_cache::store::{NodeCache, Progress, StageOptions, StageReport};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tempfile::TempDir;

const BIG: usize = 8 << 20;
const CHANGED: usize = 64 << 10;

use labpool_testkit::bytes as random;

/// An 8 MiB file, a dozen small ones (one private), an empty one and a symlink.
fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("shards/a")).unwrap();
    std::fs::write(root.join("big.bin"), random(1, BIG)).unwrap();
    for i in 0..12 {
        std::fs::write(
            root.join(format!("shards/a/f{i}.bin")),
            random(100 + i as u64, 1000 + i * 517),
        )
        .unwrap();
    }
    std::fs::set_permissions(
        root.join("shards/a/f0.bin"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(root.join("shards/empty.bin"), b"").unwrap();
    std::os::unix::fs::symlink("shards/a", root.join("latest")).unwrap();
}

fn same_tree(a: &Path, b: &Path) {
    let (ma, mb) = (scan(a, 2, &|_| {}).unwrap(), scan(b, 2, &|_| {}).unwrap());
    let d = labpool_cache::manifest::diff(&ma, &mb);
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(ma.version(), mb.version());
    for e in ma.files() {
        assert_eq!(
            hash_file(&a.join(&e.path)).unwrap(),
            hash_file(&b.join(&e.path)).unwrap(),
            "{}",
            e.path
        );
    }
}

fn node() -> (TempDir, NodeCache) {
    let dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(dir.path()).unwrap();
    (dir, cache)
}

fn local(name: &str, cache: &NodeCache) -> Arc<dyn PeerSource> {
    Arc::new(LocalPeer {
        name: name.to_string(),
        cache: cache.clone(),
    })
}

fn stage(
    cache: &NodeCache,
    m: &Manifest,
    src: &Path,
    peer: Option<Arc<dyn PeerSource>>,
) -> Result<StageReport, CacheError> {
    let last = Mutex::new(Progress::default());
    let r = cache.stage(
        "ds",
        &m.version(),
        m,
        src,
        &StageOptions {
            workers: 3,
            peer,
            ..StageOptions::default()
        },
        &|p| *last.lock().unwrap() = p.clone(),
    )?;
    let last = last.into_inner().unwrap();
    if r.files_copied + r.files_from_peer + r.files_linked > 0 {
        assert_eq!(
            (last.files_done, last.bytes_done),
            (last.files_total, last.bytes_total),
            "progress counts every file, from the peer too"
        );
    }
    Ok(r)
}

/// What a peer does wrong.
#[derive(Default)]
struct Faults {
    /// Flip a byte in every delta.
    corrupt_deltas: bool,
    /// Flip a byte in this file when sent whole.
    corrupt_whole: Option<&'static str>,
    /// Fail every file request after this many.
    fail_after: Option<usize>,
}

/// A [`LocalPeer`] with faults.
struct Faulty {
    inner: LocalPeer,
    faults: Faults,
    requests: AtomicUsize,
}

impl Faulty {
    fn new(name: &str, cache: &NodeCache, faults: Faults) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner: LocalPeer {
                name: name.to_string(),
                cache: cache.clone(),
            },
            faults,
            requests: AtomicUsize::new(0),
        })
    }

    fn request(&self) -> io::Result<()> {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        match self.faults.fail_after {
            Some(limit) if n >= limit => Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "connection reset by peer",
            )),
            _ => Ok(()),
        }
    }
}

impl PeerSource for Faulty {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn manifest(&self, name: &str, version: &str) -> io::Result<Manifest> {
        self.inner.manifest(name, version)
    }
    fn whole(&self, name: &str, version: &str, path: &str) -> io::Result<Vec<u8>> {
        self.request()?;
        let mut d = self.inner.whole(name, version, path)?;
        if self.faults.corrupt_whole == Some(path) {
            d[0] ^= 0x5a;
        }
        Ok(d)
    }
    fn delta(
        &self,
        name: &str,
        version: &str,
        path: &str,
        signature: &[u8],
    ) -> io::Result<Vec<u8>> {
        self.request()?;
        let mut d = self.inner.delta(name, version, path, signature)?;
        if self.faults.corrupt_deltas {
            let at = d.len().saturating_sub(10);
            d[at] ^= 0x5a;
        }
        Ok(d)
    }
}

fn nowhere(t: &TempDir) -> std::path::PathBuf {
    t.path().join("no-such-source")
}

#[test]
fn every_file_comes_from_the_peer_when_the_source_is_unreachable() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let m = scan(src.path(), 2, &|_| {}).unwrap();
    let (_a_dir, a) = node();
    let r = stage(&a, &m, src.path(), None).unwrap();
    assert_eq!(r.files_copied, m.files().count() as u64);
    assert_eq!(r.peer_fallback, None);
    let (_b_dir, b) = node();
    let r = stage(&b, &m, &nowhere(&src), Some(local("node-a", &a))).unwrap();
    assert_eq!((r.files_copied, r.bytes_copied), (0, 0), "{r:?}");
    assert_eq!(r.files_from_peer, m.files().count() as u64, "{r:?}");
    assert_eq!(r.bytes_from_peer, m.bytes(), "no old version: all whole");
    assert_eq!((r.files_delta, r.bytes_to_peer), (0, 0), "{r:?}");
    assert_eq!(r.peer_fallback, None);
    assert!(b.is_complete("ds", &m.version()));
    same_tree(src.path(), &b.dir("ds", &m.version()));
    assert_eq!(
        b.staged_manifest("ds", &m.version()).unwrap(),
        a.staged_manifest("ds", &m.version()).unwrap(),
        "the same hashes, checked on arrival"
    );
    assert!(
        b.verify("ds", &m.version(), None)
            .unwrap()
            .mismatched
            .is_empty()
    );
}

/// Node A holds v1 and v2 (v2: 64 KiB of big.bin rewritten), each receiver holds v1; `src`
/// holds v2.
struct Fixture {
    src: TempDir,
    v2: Manifest,
    a: (TempDir, NodeCache),
    receivers: Vec<(TempDir, NodeCache)>,
}

fn fixture(receivers: usize) -> Fixture {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let v1 = scan(src.path(), 2, &|_| {}).unwrap();
    let a = node();
    stage(&a.1, &v1, src.path(), None).unwrap();
    let receivers: Vec<_> = (0..receivers)
        .map(|_| {
            let b = node();
            stage(&b.1, &v1, src.path(), None).unwrap();
            b
        })
        .collect();
    let mut big = std::fs::read(src.path().join("big.bin")).unwrap();
    big[3_000_000..3_000_000 + CHANGED].copy_from_slice(&random(2, CHANGED));
    std::fs::write(src.path().join("big.bin"), big).unwrap();
    let (v2, diff) = rescan(src.path(), &v1, 2).unwrap();
    assert_eq!(diff.changed, ["big.bin"]);
    stage(&a.1, &v2, src.path(), None).unwrap();
    Fixture {
        src,
        v2,
        a,
        receivers,
    }
}

#[test]
fn a_changed_file_travels_as_a_delta_and_unchanged_ones_are_linked() {
    let f = fixture(1);
    let b = &f.receivers[0].1;
    let r = stage(b, &f.v2, &nowhere(&f.src), Some(local("node-a", &f.a.1))).unwrap();
    assert_eq!((r.files_from_peer, r.files_delta), (1, 1), "{r:?}");
    assert_eq!(r.bytes_copied, 0, "{r:?}");
    assert_eq!(r.files_linked, f.v2.files().count() as u64 - 1, "{r:?}");
    assert!(
        r.bytes_from_peer as f64 <= 1.2 * CHANGED as f64 + 16384.0,
        "{} bytes from the peer for {CHANGED} changed",
        r.bytes_from_peer
    );
    assert!(
        r.bytes_to_peer > 0 && r.bytes_to_peer < (BIG / 100) as u64,
        "{r:?}"
    );
    assert_eq!(r.peer_fallback, None);
    same_tree(f.src.path(), &b.dir("ds", &f.v2.version()));
}

#[test]
fn corrupted_data_from_the_peer_is_caught_and_never_kept() {
    let f = fixture(2);
    // A corrupted delta: the file comes whole from the peer instead, and is right.
    let b = &f.receivers[0].1;
    let peer = Faulty::new(
        "node-a",
        &f.a.1,
        Faults {
            corrupt_deltas: true,
            ..Faults::default()
        },
    );
    let r = stage(b, &f.v2, &nowhere(&f.src), Some(peer)).unwrap();
    assert_eq!((r.files_from_peer, r.files_delta), (1, 0), "{r:?}");
    assert!(r.bytes_from_peer >= BIG as u64, "{r:?}");
    assert_eq!((r.bytes_copied, r.peer_fallback.as_deref()), (0, None));
    same_tree(f.src.path(), &b.dir("ds", &f.v2.version()));

    // The whole file corrupted too: the peer is dropped, the source serves the file.
    let c = &f.receivers[1].1;
    let peer = Faulty::new(
        "node-a",
        &f.a.1,
        Faults {
            corrupt_deltas: true,
            corrupt_whole: Some("big.bin"),
            ..Faults::default()
        },
    );
    let r = stage(c, &f.v2, f.src.path(), Some(peer)).unwrap();
    assert_eq!((r.files_from_peer, r.files_copied), (0, 1), "{r:?}");
    assert_eq!(r.bytes_copied, BIG as u64);
    let why = r
        .peer_fallback
        .expect("the report says the peer was dropped");
    assert!(
        why.contains("node-a") && why.contains("big.bin") && why.contains("BLAKE3"),
        "{why}"
    );
    same_tree(f.src.path(), &c.dir("ds", &f.v2.version()));
}

#[test]
fn a_peer_that_fails_mid_stage_hands_the_rest_to_the_source() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let m = scan(src.path(), 2, &|_| {}).unwrap();
    let (_a_dir, a) = node();
    stage(&a, &m, src.path(), None).unwrap();
    let (_b_dir, b) = node();
    let peer = Faulty::new(
        "node-a",
        &a,
        Faults {
            fail_after: Some(5),
            ..Faults::default()
        },
    );
    let r = stage(&b, &m, src.path(), Some(peer.clone())).unwrap();
    let files = m.files().count() as u64;
    assert_eq!(r.files_from_peer, 5, "{r:?}");
    assert_eq!(r.files_copied, files - 5, "{r:?}");
    let why = r
        .peer_fallback
        .expect("the report says the peer was dropped");
    assert!(
        why.contains("node-a") && why.contains("connection reset") && why.contains("shared source"),
        "{why}"
    );
    assert!(
        peer.requests.load(Ordering::SeqCst) <= 5 + 3,
        "once dropped, no worker asks it again (at most one request in flight per worker)"
    );
    same_tree(src.path(), &b.dir("ds", &m.version()));
}

#[test]
fn files_above_the_delta_limit_come_from_the_source() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let m = scan(src.path(), 2, &|_| {}).unwrap();
    let (_a_dir, a) = node();
    stage(&a, &m, src.path(), None).unwrap();
    let (_b_dir, b) = node();
    let r = b
        .stage(
            "ds",
            &m.version(),
            &m,
            src.path(),
            &StageOptions {
                peer: Some(local("node-a", &a)),
                delta: DeltaOptions {
                    max_delta_bytes: 1 << 20,
                },
                ..StageOptions::default()
            },
            &|_| {},
        )
        .unwrap();
    assert_eq!((r.files_copied, r.bytes_copied), (1, BIG as u64), "{r:?}");
    assert_eq!(r.files_from_peer, m.files().count() as u64 - 1, "{r:?}");
    assert_eq!(r.peer_fallback, None);
    same_tree(src.path(), &b.dir("ds", &m.version()));
}

#[test]
fn a_peer_holding_another_tree_is_not_used() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let m = scan(src.path(), 2, &|_| {}).unwrap();
    let v = m.version();

    // The peer holds other data under the same version name.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("big.bin"), b"something else").unwrap();
    let mo = scan(other.path(), 2, &|_| {}).unwrap();
    let (_a_dir, a) = node();
    a.stage(
        "ds",
        &v,
        &mo,
        other.path(),
        &StageOptions::default(),
        &|_| {},
    )
    .unwrap();
    let (_b_dir, b) = node();
    let r = stage(&b, &m, src.path(), Some(local("node-a", &a))).unwrap();
    assert_eq!(r.files_from_peer, 0, "{r:?}");
    assert_eq!(r.files_copied, m.files().count() as u64);
    let why = r
        .peer_fallback
        .expect("the report says why the peer was not used");
    assert!(
        why.contains("node-a") && why.contains("another tree"),
        "{why}"
    );
    same_tree(src.path(), &b.dir("ds", &v));

    // Same metadata, but a hash the controller knows differs: refused up front too.
    let (_c_dir, c) = node();
    stage(&c, &m, src.path(), None).unwrap();
    let hashed = c.staged_manifest("ds", &v).unwrap();
    let (_d_dir, d) = node();
    stage(&d, &m, src.path(), None).unwrap();
    let path = d.root().join(format!("ds/{v}.manifest.json"));
    let mut lying = d.staged_manifest("ds", &v).unwrap();
    let e = lying
        .entries
        .iter_mut()
        .find(|e| e.path == "shards/a/f3.bin")
        .unwrap();
    e.hash = Some("0".repeat(64));
    lying.save(&path).unwrap();
    let (_e_dir, e) = node();
    let r = e
        .stage(
            "ds",
            &v,
            &hashed,
            src.path(),
            &StageOptions {
                peer: Some(local("node-d", &d)),
                ..StageOptions::default()
            },
            &|_| {},
        )
        .unwrap();
    assert_eq!(r.files_from_peer, 0, "{r:?}");
    let why = r.peer_fallback.unwrap();
    assert!(why.contains("node-d") && why.contains("f3.bin"), "{why}");
    same_tree(src.path(), &e.dir("ds", &v));

    // A peer without the version complete: its manifest is refused, the source serves all.
    let (_f_dir, f) = node();
    let (_g_dir, g) = node();
    let r = stage(&g, &m, src.path(), Some(local("node-f", &f))).unwrap();
    assert_eq!(r.files_copied, m.files().count() as u64);
    let why = r.peer_fallback.unwrap();
    assert!(
        why.contains("node-f") && why.contains("not staged completely"),
        "{why}"
    );
}

#[test]
fn serving_sends_only_regular_files_of_complete_versions() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path());
    let m = scan(src.path(), 2, &|_| {}).unwrap();
    let v = m.version();
    let (_a_dir, a) = node();
    stage(&a, &m, src.path(), None).unwrap();
    let refused = |path: &str, why: &str| {
        let e = a.serve_whole("ds", &v, path).unwrap_err();
        assert!(matches!(e, CacheError::NotServed { .. }), "{path}: {e}");
        assert!(e.to_string().contains(why), "{path}: {e}");
        let e = a.serve_delta("ds", &v, path, &signature(b"x")).unwrap_err();
        assert!(matches!(e, CacheError::NotServed { .. }), "{path}: {e}");
    };
    refused("../x", "not a relative path");
    refused("shards/../big.bin", "not a relative path");
    refused("/etc/passwd", "not a relative path");
    refused("", "not a relative path");
    refused("shards/a", "a directory");
    refused("latest", "a symlink");
    refused("nope.bin", "not in its manifest");
    refused("latest/f1.bin", "not in its manifest");
    assert_eq!(
        a.serve_whole("ds", &v, "shards/a/f1.bin").unwrap(),
        std::fs::read(src.path().join("shards/a/f1.bin")).unwrap()
    );
    let e = a.serve_delta("ds", &v, "big.bin", b"garbage").unwrap_err();
    assert!(matches!(e, CacheError::BadSignature { .. }), "{e}");
    assert!(matches!(
        a.serve_whole("../ds", &v, "big.bin"),
        Err(CacheError::InvalidName { .. })
    ));
    assert!(matches!(
        a.serve_manifest("ds", "../ds"),
        Err(CacheError::InvalidVersion { .. })
    ));

    // Files replaced by symlinks in the cache (a file, and a directory above one) are not
    // followed.
    let dir = a.dir("ds", &v);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f2.bin"), b"secret").unwrap();
    std::fs::remove_file(dir.join("shards/a/f1.bin")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("f2.bin"), dir.join("shards/a/f1.bin")).unwrap();
    refused("shards/a/f1.bin", "a symlink");
    std::fs::rename(dir.join("shards/a"), dir.join("shards/a.moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.join("shards/a")).unwrap();
    refused("shards/a/f2.bin", "a symlink");

    // Above the size limit (as the staged manifest says): refused before reading.
    let path = a.root().join(format!("ds/{v}.manifest.json"));
    let mut big = a.staged_manifest("ds", &v).unwrap();
    big.entries
        .iter_mut()
        .find(|e| e.path == "big.bin")
        .unwrap()
        .size = 300 << 20;
    big.save(&path).unwrap();
    let e = a.serve_whole("ds", &v, "big.bin").unwrap_err();
    assert!(matches!(e, CacheError::TooLargeForPeer { .. }), "{e}");
    assert!(e.to_string().contains("shared source"), "{e}");

    // An incomplete version is not served at all.
    std::fs::remove_file(a.root().join(format!("ds/{v}.complete"))).unwrap();
    for e in [
        a.serve_manifest("ds", &v).unwrap_err(),
        a.serve_whole("ds", &v, "big.bin").unwrap_err(),
        a.serve_delta("ds", &v, "big.bin", &signature(b"x"))
            .unwrap_err(),
        a.serve_manifest("ds", "0123456789abcdef").unwrap_err(),
    ] {
        assert!(matches!(e, CacheError::NotComplete { .. }), "{e}");
        assert!(e.to_string().contains("not staged completely"), "{e}");
    }
}
