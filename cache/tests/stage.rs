//! Staging on real files: contents, reuse of unchanged files, crash resume, verification and
//! repair, eviction that respects pins, and a source that changes or vanishes mid-stage.

use labpool_cache::CacheError;
use labpool_cache::manifest::{Manifest, hash_file, rescan, scan};
use labpool_cache::store::{CachedVersion, NodeCache, StageOptions, plan};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn make_tree(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("shard{}", i % 4));
        std::fs::create_dir_all(&dir).unwrap();
        let body: Vec<u8> = (0..(1000 + i * 37)).map(|b| (b * 31 + i) as u8).collect();
        std::fs::write(dir.join(format!("f{i}.bin")), body).unwrap();
    }
    std::os::unix::fs::symlink("shard0", root.join("latest")).unwrap();
}

fn same_tree(a: &Path, b: &Path) {
    let (ma, mb) = (scan(a, 2, &|_| {}).unwrap(), scan(b, 2, &|_| {}).unwrap());
    let d = labpool_cache::manifest::diff(&ma, &mb);
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(
        ma.version(),
        mb.version(),
        "paths, sizes, mtimes, modes and links agree"
    );
    for e in ma.files() {
        assert_eq!(
            hash_file(&a.join(&e.path)).unwrap(),
            hash_file(&b.join(&e.path)).unwrap(),
            "{}",
            e.path
        );
    }
}

/// True when every file of version `m` hashes as staged.
fn intact(cache: &NodeCache, m: &Manifest) -> bool {
    cache
        .verify("ds", &m.version(), None)
        .unwrap()
        .mismatched
        .is_empty()
}

fn stage(cache: &NodeCache, m: &Manifest, src: &Path) -> labpool_cache::store::StageReport {
    cache
        .stage(
            "ds",
            &m.version(),
            m,
            src,
            &StageOptions {
                workers: 3,
                ..StageOptions::default()
            },
            &|_| {},
        )
        .unwrap()
}

#[test]
fn a_staged_version_is_an_exact_copy_and_a_new_one_copies_only_changes() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), 40);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(cache_dir.path()).unwrap();
    let v1 = scan(src.path(), 2, &|_| {}).unwrap();
    let r = stage(&cache, &v1, src.path());
    assert_eq!(
        (r.files_copied, r.bytes_copied, r.files_linked),
        (40, v1.bytes(), 0)
    );
    same_tree(src.path(), &cache.dir("ds", &v1.version()));
    assert_eq!(
        stage(&cache, &v1, src.path()),
        Default::default(),
        "staging again does nothing"
    );

    // Change one file, add one; the rest is linked from v1.
    std::fs::write(src.path().join("shard1/f1.bin"), b"changed").unwrap();
    std::fs::write(src.path().join("shard2/new.bin"), vec![1u8; 5000]).unwrap();
    let (v2, diff) = rescan(src.path(), &v1, 2).unwrap();
    assert_eq!(diff.added, ["shard2/new.bin"]);
    assert_eq!(
        diff.changed,
        ["shard1/f1.bin", "shard2"],
        "the new file changed its directory's mtime"
    );
    assert_eq!(
        cache.bytes_to_stage("ds", &v2.version(), &v2).unwrap(),
        5007
    );
    assert_eq!(labpool_cache::store::bytes_to_stage(&v2, &[&v1]), 5007);
    assert_eq!(labpool_cache::store::bytes_to_stage(&v2, &[]), v2.bytes());
    let r = stage(&cache, &v2, src.path());
    assert_eq!((r.files_copied, r.bytes_copied), (2, 5007));
    assert_eq!(cache.bytes_to_stage("ds", &v2.version(), &v2).unwrap(), 0);
    assert_eq!(r.files_linked, 39);
    same_tree(src.path(), &cache.dir("ds", &v2.version()));
    // v1 is untouched: a job running on it sees its old file.
    assert_eq!(
        std::fs::read(cache.dir("ds", &v1.version()).join("shard1/f1.bin"))
            .unwrap()
            .len(),
        1037
    );
    let shared = std::fs::metadata(cache.dir("ds", &v2.version()).join("shard0/f0.bin")).unwrap();
    assert_eq!(shared.nlink(), 2);
    let listed = cache.list().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|v| v.complete));
    let unique = |v: &str| listed.iter().find(|c| c.version == v).unwrap().unique_bytes;
    assert_eq!(
        unique(&v1.version()),
        1037,
        "only v1's old f1.bin is v1's alone"
    );
    assert_eq!(
        unique(&v2.version()),
        5007,
        "only the changed and new files are v2's alone"
    );
    assert!(
        cache.used_bytes() < v1.bytes() + v2.bytes(),
        "linked files are stored once"
    );
}

#[test]
fn a_version_no_job_needs_is_taken_over_and_only_changes_are_written() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), 40);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(cache_dir.path()).unwrap();
    let v1 = scan(src.path(), 2, &|_| {}).unwrap();
    stage(&cache, &v1, src.path());
    // v2 links from v1 (a job still reads v1).
    std::fs::write(src.path().join("shard1/f1.bin"), b"changed").unwrap();
    let (v2, _) = rescan(src.path(), &v1, 2).unwrap();
    stage(&cache, &v2, src.path());
    // v3: a change, a removal, a new file, a file turned into a directory, a directory gone.
    std::fs::write(src.path().join("shard2/f2.bin"), b"v3").unwrap();
    std::fs::remove_file(src.path().join("shard3/f3.bin")).unwrap();
    std::fs::write(src.path().join("shard0/new.bin"), vec![7u8; 300]).unwrap();
    std::fs::remove_file(src.path().join("shard0/f4.bin")).unwrap();
    std::fs::create_dir(src.path().join("shard0/f4.bin")).unwrap();
    std::fs::write(src.path().join("shard0/f4.bin/inner"), b"x").unwrap();
    for i in (1..40).step_by(4) {
        std::fs::remove_file(src.path().join(format!("shard1/f{i}.bin"))).unwrap();
    }
    std::fs::remove_dir(src.path().join("shard1")).unwrap();
    let (v3, _) = rescan(src.path(), &v2, 2).unwrap();
    let r = cache
        .stage(
            "ds",
            &v3.version(),
            &v3,
            src.path(),
            &StageOptions {
                take_over: vec![v2.version()],
                ..StageOptions::default()
            },
            &|_| {},
        )
        .unwrap();
    assert_eq!(r.files_copied, 3, "f2, new.bin and f4.bin/inner: {r:?}");
    assert_eq!(r.files_linked, 0, "{r:?}");
    assert_eq!(r.files_reused, 40 - 10 - 3, "{r:?}");
    assert_eq!(r.files_resumed, 0, "{r:?}");
    same_tree(src.path(), &cache.dir("ds", &v3.version()));
    assert!(!cache.is_complete("ds", &v2.version()));
    assert!(!cache.dir("ds", &v2.version()).exists());
    // v1 shared inodes with v2; replacing and removing files in v3 never wrote through them.
    let v1_dir = cache.dir("ds", &v1.version());
    assert_eq!(
        std::fs::read(v1_dir.join("shard2/f2.bin")).unwrap().len(),
        1074
    );
    assert!(v1_dir.join("shard3/f3.bin").exists());
    assert!(intact(&cache, &v1));
    assert!(intact(&cache, &v3));
    let listed: Vec<String> = cache
        .list()
        .unwrap()
        .into_iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
}

#[test]
fn a_take_over_interrupted_after_its_rename_is_finished_by_the_next_stage() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), 12);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(cache_dir.path()).unwrap();
    let v1 = scan(src.path(), 2, &|_| {}).unwrap();
    stage(&cache, &v1, src.path());
    // The source turns a file into a directory and drops a whole directory.
    std::fs::remove_file(src.path().join("shard0/f0.bin")).unwrap();
    std::fs::create_dir(src.path().join("shard0/f0.bin")).unwrap();
    std::fs::write(src.path().join("shard0/f0.bin/x"), b"x").unwrap();
    std::fs::remove_dir_all(src.path().join("shard3")).unwrap();
    let (v2, _) = rescan(src.path(), &v1, 2).unwrap();
    // A crash right after the take-over's rename: v1's files under v2's name, nothing cleaned.
    std::fs::remove_file(
        cache_dir
            .path()
            .join(format!("ds/{}.complete", v1.version())),
    )
    .unwrap();
    std::fs::rename(
        cache.dir("ds", &v1.version()),
        cache.dir("ds", &v2.version()),
    )
    .unwrap();
    let r = stage(&cache, &v2, src.path());
    assert!(cache.is_complete("ds", &v2.version()), "{r:?}");
    same_tree(src.path(), &cache.dir("ds", &v2.version()));
}

#[test]
fn an_interrupted_stage_resumes_and_never_shows_half_files() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), 20);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(cache_dir.path()).unwrap();
    let m = scan(src.path(), 2, &|_| {}).unwrap();
    // Make one file unreadable so the first attempt fails part way, as a crash would leave it.
    let victim = src.path().join("shard3/f19.bin");
    let saved = std::fs::read(&victim).unwrap();
    std::fs::remove_file(&victim).unwrap();
    let first = cache.stage(
        "ds",
        &m.version(),
        &m,
        src.path(),
        &StageOptions {
            workers: 1,
            ..StageOptions::default()
        },
        &|_| {},
    );
    assert!(first.is_err());
    assert!(
        !cache.is_complete("ds", &m.version()),
        "a failed stage is not a version"
    );
    // A half-written file from the "crash".
    let dir = cache.dir("ds", &m.version());
    std::fs::write(dir.join("shard3/f19.bin.labpool.partial"), b"half").unwrap();
    std::fs::write(&victim, saved).unwrap();
    labpool_cache::copy::set_mtime(&victim, m.by_path()["shard3/f19.bin"].mtime_ns).unwrap();
    labpool_cache::copy::set_mtime(&src.path().join("shard3"), m.by_path()["shard3"].mtime_ns)
        .unwrap();
    // A stray partial of a file that the journal says is done, too.
    std::fs::write(dir.join("shard0/f0.bin.labpool.partial"), b"half").unwrap();
    let r = stage(&cache, &m, src.path());
    assert!(r.files_resumed > 0, "{r:?}");
    assert_eq!(r.files_resumed + r.files_copied, 20);
    assert!(cache.is_complete("ds", &m.version()));
    same_tree(src.path(), &dir);
    let partials: Vec<_> = walk(&dir)
        .into_iter()
        .filter(|p| p.ends_with(".partial"))
        .collect();
    assert!(partials.is_empty(), "{partials:?}");
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path().display().to_string());
        }
    }
    out
}

#[test]
fn verify_finds_corruption_and_repairs_it_without_touching_other_versions() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), 8);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(cache_dir.path()).unwrap();
    let v1 = scan(src.path(), 2, &|_| {}).unwrap();
    stage(&cache, &v1, src.path());
    std::fs::write(src.path().join("extra.txt"), "x").unwrap();
    let (v2, _) = rescan(src.path(), &v1, 2).unwrap();
    stage(&cache, &v2, src.path());
    let bad = cache.dir("ds", &v2.version()).join("shard2/f2.bin");
    // Corrupt through a fresh file (as a disk error would leave it), v1 keeps its own copy.
    std::fs::remove_file(&bad).unwrap();
    std::fs::write(&bad, b"garbage").unwrap();
    let r = cache.verify("ds", &v2.version(), None).unwrap();
    assert_eq!(r.mismatched, ["shard2/f2.bin"]);
    let r = cache.verify("ds", &v2.version(), Some(src.path())).unwrap();
    assert_eq!(r.repaired, ["shard2/f2.bin"]);
    assert!(intact(&cache, &v2));
    assert!(intact(&cache, &v1));
}

#[test]
fn a_source_that_changes_or_vanishes_mid_stage_leaves_no_version() {
    let src = tempfile::tempdir().unwrap();
    make_tree(src.path(), 6);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(cache_dir.path()).unwrap();
    let m = scan(src.path(), 2, &|_| {}).unwrap();
    std::fs::write(src.path().join("shard1/f1.bin"), b"edited after the scan").unwrap();
    let e = cache
        .stage(
            "ds",
            &m.version(),
            &m,
            src.path(),
            &StageOptions::default(),
            &|_| {},
        )
        .unwrap_err();
    assert!(matches!(e, CacheError::SourceChanged { .. }), "{e}");
    assert!(e.to_string().contains("labpool dataset rescan"));
    assert!(!cache.is_complete("ds", &m.version()));
    std::fs::remove_dir_all(src.path()).unwrap();
    let e = cache
        .stage(
            "ds",
            &m.version(),
            &m,
            src.path(),
            &StageOptions::default(),
            &|_| {},
        )
        .unwrap_err();
    assert!(matches!(e, CacheError::Io { .. }), "{e}");
    assert!(!cache.is_complete("ds", &m.version()));
    cache.remove("ds", &m.version()).unwrap();
    assert!(cache.list().unwrap().is_empty());
}

fn version(name: &str, v: &str, bytes: u64, complete: bool) -> CachedVersion {
    CachedVersion {
        name: name.into(),
        version: v.into(),
        complete,
        bytes,
        unique_bytes: bytes,
        files: 1,
        uses: 0,
        hits: 0,
        last_use_ms: None,
    }
}

#[test]
fn eviction_takes_furthest_next_use_then_largest_and_never_a_pin() {
    let vs = vec![
        version("a", "1", 40, true),
        version("b", "1", 30, true),
        version("c", "1", 20, true),
        version("d", "1", 10, false),
    ];
    let pins: BTreeSet<(String, String)> = [("a".to_string(), "1".to_string())].into();
    let next: BTreeMap<(String, String), usize> = [
        (("b".to_string(), "1".to_string()), 5),
        (("c".to_string(), "1".to_string()), 2),
    ]
    .into();
    // 100 used of 100; 25 needed: the incomplete one (10), then b (next use 5, further than c's 2).
    let out = plan(&vs, 100, 25, 100, &pins, &next).unwrap();
    assert_eq!(
        out,
        [
            ("d".to_string(), "1".to_string()),
            ("b".to_string(), "1".to_string())
        ]
    );
    assert!(
        plan(&vs, 50, 25, 100, &pins, &next).unwrap().is_empty(),
        "it fits without evicting"
    );
    let e = plan(&vs, 100, 70, 100, &pins, &next).unwrap_err();
    assert!(matches!(e, CacheError::NoRoom { pinned: 40, .. }), "{e}");
}

/// Among versions no queued job reads, the least recently used goes first (a never-used one
/// before any used one), and among equally recent ones the largest: the order the simulator
/// found to keep a popular dataset whose next use is not known yet (it re-read 147 GB again and
/// again when size decided).
#[test]
fn eviction_of_data_with_no_known_use_takes_the_least_recently_used_then_the_largest() {
    let used = |name: &str, bytes: u64, at: Option<i64>| CachedVersion {
        last_use_ms: at,
        ..version(name, "1", bytes, true)
    };
    let vs = vec![
        used("imagenet", 147, Some(9_000)),
        used("old", 10, Some(1_000)),
        used("never", 5, None),
        used("twin-small", 20, Some(5_000)),
        used("twin-large", 30, Some(5_000)),
    ];
    let order: Vec<&str> =
        labpool_cache::evict::eviction_order(&vs, &BTreeSet::new(), &BTreeMap::new())
            .iter()
            .map(|v| v.name.as_str())
            .collect();
    assert_eq!(
        order,
        ["never", "old", "twin-large", "twin-small", "imagenet"]
    );
    // A known next use still decides first: the queued job's data goes last.
    let next: BTreeMap<(String, String), usize> =
        [(("never".to_string(), "1".to_string()), 0)].into();
    let out = plan(&vs, 212, 10, 212, &BTreeSet::new(), &next).unwrap();
    assert_eq!(out, [("old".to_string(), "1".to_string())]);
}

proptest::proptest! {
    /// Whatever the listing, a plan never names a pinned version, and when it succeeds the
    /// needed bytes fit under capacity after removing what it names.
    #[test]
    fn eviction_plans_respect_pins_and_capacity(
        sizes in proptest::collection::vec((1u64..1000, proptest::bool::ANY, proptest::bool::ANY), 1..12),
        needed in 0u64..3000,
        capacity in 0u64..8000,
    ) {
        let vs: Vec<CachedVersion> =
            sizes.iter().enumerate().map(|(i, (b, complete, _))| version("d", &i.to_string(), *b, *complete)).collect();
        let pins: BTreeSet<(String, String)> =
            sizes.iter().enumerate().filter(|(_, (_, _, p))| *p).map(|(i, _)| ("d".to_string(), i.to_string())).collect();
        let used: u64 = vs.iter().map(|v| v.bytes).sum();
        let next = BTreeMap::new();
        match plan(&vs, used, needed, capacity, &pins, &next) {
            Ok(out) => {
                proptest::prop_assert!(out.iter().all(|k| !pins.contains(k)));
                let freed: u64 = vs.iter().filter(|v| out.contains(&(v.name.clone(), v.version.clone()))).map(|v| v.bytes).sum();
                proptest::prop_assert!(used - freed + needed <= capacity);
            }
            Err(CacheError::NoRoom { pinned, .. }) => {
                let unpinned: u64 = vs.iter().filter(|v| !pins.contains(&(v.name.clone(), v.version.clone()))).map(|v| v.bytes).sum();
                proptest::prop_assert!(used - unpinned + needed > capacity);
                proptest::prop_assert_eq!(pinned, used - unpinned);
            }
            Err(e) => proptest::prop_assert!(false, "{}", e),
        }
    }
}
