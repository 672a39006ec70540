//! A version that takes over an older one writes only what changed: its staged manifest is kept
//! as changes against one base, read back whole, written whole again once the changes grow,
//! and a take-over a crash interrupted resumes what it kept instead of copying it again.

use labpool_cache::CacheError;
use labpool_cache::manifest::{Manifest, hash_file, rescan, scan};
use labpool_cache::store::{NodeCache, StageOptions};
use std::path::{Path, PathBuf};

const FILES: usize = 200;

fn file(root: &Path, i: usize) -> PathBuf {
    root.join(format!("d{}/f{i:03}.bin", i % 4))
}

fn write(root: &Path, i: usize, round: usize) {
    let body: Vec<u8> = (0..(500 + i * 7 + round))
        .map(|b| (b * 31 + i + round) as u8)
        .collect();
    std::fs::write(file(root, i), body).unwrap();
}

fn tree() -> tempfile::TempDir {
    let src = tempfile::tempdir().unwrap();
    for d in 0..4 {
        std::fs::create_dir(src.path().join(format!("d{d}"))).unwrap();
    }
    for i in 0..FILES {
        write(src.path(), i, 0);
    }
    src
}

/// `m` with every file's hash as the source holds it: what a staged manifest must read back as.
fn hashed(m: &Manifest, src: &Path) -> Manifest {
    let mut m = m.clone();
    for e in &mut m.entries {
        if e.kind == labpool_cache::manifest::Kind::File {
            e.hash = Some(hash_file(&src.join(&e.path)).unwrap());
        }
    }
    m
}

/// The tree, and a cache holding its first version, staged whole.
fn first_version() -> (tempfile::TempDir, tempfile::TempDir, NodeCache, Manifest) {
    let src = tree();
    let root = tempfile::tempdir().unwrap();
    let cache = NodeCache::open(root.path()).unwrap();
    let v1 = scan(src.path(), 2, &|_| {}).unwrap();
    let opts = StageOptions::default();
    cache
        .stage("ds", &v1.version(), &v1, src.path(), &opts, &|_| {})
        .unwrap();
    (src, root, cache, v1)
}

fn side(cache: &NodeCache, version: &str, suffix: &str) -> PathBuf {
    cache.root().join("ds").join(format!("{version}.{suffix}"))
}

fn take_over(
    cache: &NodeCache,
    m: &Manifest,
    src: &Path,
    old: &str,
) -> labpool_cache::store::StageReport {
    let opts = StageOptions {
        take_over: vec![old.to_string()],
        workers: 2,
        ..StageOptions::default()
    };
    cache
        .stage("ds", &m.version(), m, src, &opts, &|_| {})
        .unwrap()
}

fn len(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

#[test]
fn a_chain_of_take_overs_writes_only_changed_entries_and_reads_them_back_whole() {
    let (src, _root, cache, mut m) = first_version();
    let whole = len(&side(&cache, &m.version(), "manifest.json"));
    let (mut as_changes, mut rewritten) = (0, 0);
    // Each round changes 10 files not changed before (5% of the tree), removes one and adds
    // one: the changes against the first base pass a quarter of it in the sixth round.
    for round in 1..=8 {
        for i in (round - 1) * 10..round * 10 {
            write(src.path(), i, round);
        }
        std::fs::remove_file(file(src.path(), FILES - round)).unwrap();
        write(src.path(), FILES + round, round);
        let (next, diff) = rescan(src.path(), &m, 2).unwrap();
        let files = diff.changed.iter().filter(|p| p.contains('/')).count();
        assert_eq!(files, 10, "round {round}: {diff:?}");
        let r = take_over(&cache, &next, src.path(), &m.version());
        assert_eq!(r.files_copied, 11, "round {round}: {r:?}");
        assert_eq!(r.files_reused, FILES as u64 - 11, "round {round}: {r:?}");
        let v = next.version();
        assert!(cache.is_complete("ds", &v));
        assert!(!cache.dir("ds", &m.version()).exists(), "taken over");
        for suffix in [
            "manifest.json",
            "manifest-base.json",
            "taken.json",
            "journal",
        ] {
            assert!(
                !side(&cache, &m.version(), suffix).exists(),
                "{suffix} of the old version"
            );
        }
        assert!(!side(&cache, &v, "taken.json").exists() && !side(&cache, &v, "journal").exists());
        assert_eq!(
            cache.staged_manifest("ds", &v).unwrap(),
            hashed(&next, src.path()),
            "round {round}: read back whole, every file with its hash"
        );
        assert!(cache.verify("ds", &v, None).unwrap().mismatched.is_empty());
        let written = len(&side(&cache, &v, "manifest.json"));
        if side(&cache, &v, "manifest-base.json").exists() {
            as_changes += 1;
            assert!(
                written * 4 < whole,
                "round {round}: changes of {written} bytes against a whole manifest of {whole}"
            );
        } else {
            rewritten += 1;
            assert!(
                written * 2 > whole,
                "round {round}: whole again, {written} bytes"
            );
        }
        m = next;
    }
    assert!(
        as_changes >= 4 && rewritten >= 1,
        "{as_changes} as changes, {rewritten} whole"
    );
}

#[test]
fn a_take_over_interrupted_after_its_renames_resumes_what_it_kept() {
    let (src, _root, cache, v1) = first_version();
    write(src.path(), 0, 1);
    let (v2, _) = rescan(src.path(), &v1, 2).unwrap();
    take_over(&cache, &v2, src.path(), &v1.version());
    assert!(
        side(&cache, &v2.version(), "manifest-base.json").exists(),
        "kept as changes"
    );
    for i in 1..4 {
        write(src.path(), i, 2);
    }
    let (v3, _) = rescan(src.path(), &v2, 2).unwrap();
    // A crash in the take-over of v2 by v3, after its renames and before any copy.
    let (a, b) = (v2.version(), v3.version());
    std::fs::remove_file(side(&cache, &a, "complete")).unwrap();
    let renames = [
        (
            side(&cache, &a, "manifest-base.json"),
            side(&cache, &b, "manifest-base.json"),
        ),
        (
            side(&cache, &a, "manifest.json"),
            side(&cache, &b, "taken.json"),
        ),
        (cache.dir("ds", &a), cache.dir("ds", &b)),
    ];
    for (from, to) in renames {
        std::fs::rename(from, to).unwrap();
    }
    let r = cache
        .stage("ds", &b, &v3, src.path(), &StageOptions::default(), &|_| {})
        .unwrap();
    assert_eq!(
        (r.files_copied, r.files_resumed, r.files_reused),
        (3, FILES as u64 - 3, 0),
        "only the three changed files are copied again: {r:?}"
    );
    assert!(cache.is_complete("ds", &b));
    assert!(!side(&cache, &b, "taken.json").exists());
    assert_eq!(
        cache.staged_manifest("ds", &b).unwrap(),
        hashed(&v3, src.path())
    );
    assert!(cache.verify("ds", &b, None).unwrap().mismatched.is_empty());
}

#[test]
fn changes_are_never_read_against_a_base_they_were_not_made_against() {
    let (src, root, cache, v1) = first_version();
    write(src.path(), 7, 1);
    let (v2, _) = rescan(src.path(), &v1, 2).unwrap();
    take_over(&cache, &v2, src.path(), &v1.version());
    let base = side(&cache, &v2.version(), "manifest-base.json");
    // Another whole manifest put in its place: it parses, but it is not the base. A new handle
    // (an agent started again) reads the files, not what the last stage kept parsed.
    std::fs::write(&base, br#"{"entries":[]}"#).unwrap();
    let cache = NodeCache::open(root.path()).unwrap();
    match cache
        .staged_manifest("ds", &v2.version())
        .map(|m| m.entries.len())
    {
        Err(CacheError::Corrupt { path, message }) => {
            assert_eq!(path, side(&cache, &v2.version(), "manifest.json"));
            assert!(message.contains("were made against a base of"), "{message}");
            assert!(
                message.contains("so the version is staged again"),
                "{message}"
            );
        }
        other => panic!("read against the wrong base: {other:?}"),
    }
    std::fs::remove_file(&base).unwrap();
    assert!(
        cache.staged_manifest("ds", &v2.version()).is_err(),
        "no base at all"
    );
}
