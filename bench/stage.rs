//! Dataset staging against `cp -a` and `rsync -a`, on the same generated tree, on the same disk,
//! in one run, with medians and ratios.
//!
//! ```text
//! cargo bench --bench stage                        # the issue's tree: ~100k files, ~6 GB
//! BENCH_SCALE=0.1 BENCH_RUNS=3 cargo bench --bench stage   # a tenth of it, for a quick look
//! BENCH_DIR=/mnt/ssd/bench cargo bench --bench stage       # where the trees go
//! BENCH_WORKERS=8 cargo bench --bench stage                 # labpool's copy workers
//! ```
//!
//! The tree: 100,000 x SCALE small files of 4-64 KiB in 100 directories, 300 x SCALE shards of
//! 1-16 MiB, and 3 files of 200 MiB x SCALE. Three cases:
//! - cold: an empty destination. labpool stages with its parallel workers (hashing every byte,
//!   writing through `.partial`, fsync, rename), `cp -a` and `rsync -a` copy.
//! - 1% change: 1% of the small files and shards get new content and size. labpool rescans the
//!   source (size+mtime quick check, hashing only what changed) and stages the new version by
//!   taking over the old one, which no job reads any more (renamed; changed files replaced
//!   through `.partial`, fsync, rename); rsync updates a copy in place. (When a running job
//!   still reads the old version, unchanged files are hard-linked instead; see the cache tests.)
//!   "peer + sync" adds the `sync` that makes rsync's changes as durable as a staged version.
//! - no change: labpool rescans and finds the version unchanged; rsync walks both trees.
//! - job start with current data: what each job pays at its start. labpool checks that its
//!   version is complete on the node; the seed's job script runs `rsync -a` every time.
//!
//! The source is read from the page cache by every tool alike (it was just written); each run
//! starts after a `sync`. Each cold run starts by deleting the last run's copies, and on a disk
//! with online discard the first writer after that is slow, so the tool that goes first rotates
//! from run to run (a multiple of 3 runs gives each tool the first place equally often).
//! Bytes written per byte changed: labpool's stage report; rsync's `--stats` "Total
//! transferred file size".

use labpool_cache::manifest::{Manifest, rescan, scan};
use labpool_cache::store::{NodeCache, StageOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[path = "common.rs"]
mod common;
use common::{bench_base, env_num, median, rm, rsync_transferred, run, scratch_dir};

/// Deterministic filler, fast to make: a 64-bit pattern per file.
fn fill(path: &Path, seed: u64, len: usize) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = Vec::with_capacity(len + 8);
    while buf.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf.extend_from_slice(&x.to_le_bytes());
    }
    buf.truncate(len);
    std::fs::write(path, buf).unwrap();
}

struct Tree {
    small: Vec<PathBuf>,
    shards: Vec<PathBuf>,
}

fn generate(root: &Path, scale: f64) -> Tree {
    let n_small = (100_000.0 * scale) as usize;
    let n_shards = ((300.0 * scale) as usize).max(3);
    let big = ((200.0 * scale).max(8.0) as usize) << 20;
    let mut tree = Tree {
        small: Vec::new(),
        shards: Vec::new(),
    };
    let mut rng = 0x1234_5678_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for d in 0..100 {
        std::fs::create_dir_all(root.join(format!("small/{d:03}"))).unwrap();
    }
    std::fs::create_dir_all(root.join("shards")).unwrap();
    std::fs::create_dir_all(root.join("big")).unwrap();
    for i in 0..n_small {
        let p = root.join(format!("small/{:03}/{i:06}.jpg", i % 100));
        fill(&p, i as u64, 4096 + (next() % (60 * 1024)) as usize);
        tree.small.push(p);
    }
    for i in 0..n_shards {
        let p = root.join(format!("shards/shard-{i:04}.tar"));
        fill(
            &p,
            1_000_000 + i as u64,
            (1 << 20) + (next() % (15 << 20)) as usize,
        );
        tree.shards.push(p);
    }
    for i in 0..3 {
        fill(&root.join(format!("big/blob-{i}.bin")), 2_000_000 + i, big);
    }
    tree
}

fn du_bytes(root: &Path) -> (u64, u64) {
    let m = scan(root, 8, &|_| {}).unwrap();
    (m.files().count() as u64, m.bytes())
}

fn sync() {
    nix::unistd::sync();
}

fn timed(f: impl FnOnce()) -> f64 {
    sync();
    let t0 = Instant::now();
    f();
    t0.elapsed().as_secs_f64()
}

/// How long a `sync` takes: the flush of what the last tool left dirty.
fn sync_time() -> f64 {
    let t0 = Instant::now();
    sync();
    t0.elapsed().as_secs_f64()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    common::require_tools("cargo bench --bench stage", &[("rsync", "rsync")]);
    let scale = env_num("BENCH_SCALE", 1.0);
    let runs = env_num("BENCH_RUNS", 3.0) as usize;
    let base = bench_base();
    let dir = scratch_dir(&base, "stage");
    let src = dir.path().join("src");
    let t0 = Instant::now();
    let tree = generate(&src, scale);
    let (files, bytes) = du_bytes(&src);
    println!(
        "tree: {files} files, {:.2} GB (scale {scale}), generated in {:.0} s; {runs} runs per case; workers {}",
        bytes as f64 / 1e9,
        t0.elapsed().as_secs_f64(),
        env_num("BENCH_WORKERS", StageOptions::default().workers as f64)
    );
    let opts = StageOptions {
        workers: env_num("BENCH_WORKERS", StageOptions::default().workers as f64) as usize,
        ..StageOptions::default()
    };
    let t_scan = Instant::now();
    let mut manifest = scan(&src, 8, &|_| {}).unwrap();
    println!(
        "registration scan (walk, no hashing): {:.2} s",
        t_scan.elapsed().as_secs_f64()
    );

    // Cold.
    let (mut lp, mut cp, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    // cp -a and rsync -a leave their data in the page cache; a staged version is on disk.
    // "+ sync" adds the flush that makes their copies as durable.
    let (mut cps, mut rss) = (Vec::new(), Vec::new());
    let cache_root = dir.path().join("cache");
    let (cp_dst, rs_dst) = (dir.path().join("cp"), dir.path().join("rsync"));
    let version = manifest.version();
    for r in 0..runs {
        rm(&cache_root);
        rm(&cp_dst);
        rm(&rs_dst);
        let cache = NodeCache::open(&cache_root).unwrap();
        // The first tool after the deletes writes slowest on this disk (see docs/benchmarks.md),
        // so each run starts with the next tool: every tool pays for it once in three runs.
        let (mut t_lp, mut t_cp, mut t_rs) = (0.0, 0.0, 0.0);
        let (mut s_cp, mut s_rs) = (0.0, 0.0);
        for tool in (0..3).map(|i| (i + r) % 3) {
            match tool {
                0 => {
                    t_lp = timed(|| {
                        cache
                            .stage("ds", &version, &manifest, &src, &opts, &|_| {})
                            .unwrap();
                    })
                }
                1 => {
                    t_cp = timed(|| {
                        run(Command::new("cp").arg("-a").arg(&src).arg(&cp_dst));
                    });
                    s_cp = sync_time();
                }
                _ => {
                    t_rs = timed(|| {
                        run(Command::new("rsync")
                            .arg("-a")
                            .arg(format!("{}/", src.display()))
                            .arg(&rs_dst));
                    });
                    s_rs = sync_time();
                }
            }
        }
        lp.push(t_lp);
        cp.push(t_cp);
        cps.push(t_cp + s_cp);
        rs.push(t_rs);
        rss.push(t_rs + s_rs);
        println!(
            "  cold run {} ({} first): labpool {:.2} s, cp -a {:.2} s (+ sync {:.2} s), rsync -a {:.2} s (+ sync {:.2} s)",
            r + 1,
            ["labpool", "cp -a", "rsync -a"][r % 3],
            lp[r],
            cp[r],
            cps[r],
            rs[r],
            rss[r]
        );
    }
    let (lp_c, cp_c, rs_c) = (median(lp), median(cp), median(rs));
    let (cps_c, rss_c) = (median(cps), median(rss));

    // 1% change, then no change. Each run changes a different 1% and stages a new version.
    let (mut lp1, mut rs1, mut amp, mut rs_amp) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // rsync -a and the `sync` that makes its changes as durable as a staged version.
    let mut rs1s = Vec::new();
    let (mut lp0, mut rs0) = (Vec::new(), Vec::new());
    let cache = NodeCache::open(&cache_root).unwrap();
    let mut previous_version = version.clone();
    for r in 0..runs {
        let pick = |v: &Vec<PathBuf>| -> Vec<PathBuf> {
            let n = (v.len() / 100).max(1);
            v.iter()
                .skip(r)
                .step_by(v.len() / n)
                .take(n)
                .cloned()
                .collect()
        };
        let mut changed: Vec<PathBuf> = pick(&tree.small);
        changed.extend(pick(&tree.shards));
        for (i, p) in changed.iter().enumerate() {
            let len = std::fs::metadata(p).unwrap().len() as usize;
            fill(p, 9_000_000 + (r * 100_000 + i) as u64, len + 1 + (i % 7));
        }
        let changed_bytes: u64 = changed
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        let mut report = None;
        let mut next: Option<Manifest> = None;
        let mut rescan_s = 0.0;
        lp1.push(timed(|| {
            let t = Instant::now();
            let (m, _) = rescan(&src, &manifest, 8).unwrap();
            rescan_s = t.elapsed().as_secs_f64();
            let v = m.version();
            // No job reads the old version any more: the new one takes it over, as the node
            // agent does for versions nothing pins.
            let take = StageOptions {
                take_over: vec![previous_version.clone()],
                ..opts.clone()
            };
            report = Some(cache.stage("ds", &v, &m, &src, &take, &|_| {}).unwrap());
            next = Some(m);
        }));
        let report = report.unwrap();
        amp.push(report.bytes_copied as f64 / changed_bytes as f64);
        let stats = std::cell::RefCell::new(String::new());
        rs1.push(timed(|| {
            *stats.borrow_mut() = run(Command::new("rsync")
                .arg("-a")
                .arg("--stats")
                .arg(format!("{}/", src.display()))
                .arg(&rs_dst));
        }));
        rs1s.push(rs1[r] + sync_time());
        rs_amp.push(rsync_transferred(&stats.borrow()) as f64 / changed_bytes as f64);
        manifest = next.unwrap();
        previous_version = manifest.version();
        // No change: labpool's quick check against rsync's.
        let mut same = false;
        lp0.push(timed(|| {
            let (m, diff) = rescan(&src, &manifest, 8).unwrap();
            same = diff.is_empty() && m.version() == manifest.version();
        }));
        assert!(same, "nothing changed, so the version must not change");
        rs0.push(timed(|| {
            run(Command::new("rsync")
                .arg("-a")
                .arg(format!("{}/", src.display()))
                .arg(&rs_dst));
        }));
        println!(
            "  run {}: 1% change ({} files, {:.1} MB): labpool {:.2} s (rescan {:.2} s; copied {}, kept {}), rsync -a {:.2} s (+ sync {:.2} s); no change: labpool {:.2} s, rsync -a {:.2} s",
            r + 1,
            changed.len(),
            changed_bytes as f64 / 1e6,
            lp1[r],
            rescan_s,
            report.files_copied,
            report.files_reused + report.files_linked,
            rs1[r],
            rs1s[r],
            lp0[r],
            rs0[r]
        );
    }
    let (lp1_m, rs1_m, lp0_m, rs0_m) = (median(lp1), median(rs1), median(lp0), median(rs0));
    let rs1s_m = median(rs1s);
    // What a job start pays: labpool checks that its version is complete on the node (the
    // source was re-validated once, at rescan); the seed's job script runs rsync every time.
    let checks = 1000;
    let t0 = Instant::now();
    for _ in 0..checks {
        assert!(cache.is_complete("ds", &previous_version));
    }
    let per_job = t0.elapsed().as_secs_f64() / checks as f64;
    println!();
    println!("case                 labpool     cp -a   rsync -a   vs cp   vs rsync");
    println!(
        "cold                 {lp_c:>6.2} s  {cp_c:>6.2} s  {rs_c:>7.2} s  {:>5.2}x  {:>7.2}x",
        cp_c / lp_c,
        rs_c / lp_c
    );
    println!(
        "cold, peers + sync   {lp_c:>6.2} s  {cps_c:>6.2} s  {rss_c:>7.2} s  {:>5.2}x  {:>7.2}x",
        cps_c / lp_c,
        rss_c / lp_c
    );
    println!(
        "1% change            {lp1_m:>6.2} s         -  {rs1_m:>7.2} s       -  {:>7.2}x",
        rs1_m / lp1_m
    );
    println!(
        "1% change, peer + sync {lp1_m:>4.2} s         -  {rs1s_m:>7.2} s       -  {:>7.2}x",
        rs1s_m / lp1_m
    );
    println!(
        "no change            {lp0_m:>6.2} s         -  {rs0_m:>7.2} s       -  {:>7.2}x",
        rs0_m / lp0_m
    );
    println!(
        "job start, data current  {:>8.1} us         -  {rs0_m:>7.2} s       -  {:>7.0}x",
        per_job * 1e6,
        rs0_m / per_job
    );
    println!(
        "bytes written per byte changed: labpool {:.3}, rsync -a {:.3} (medians)",
        median(amp),
        median(rs_amp)
    );
    println!("(ratios above 1 mean labpool is faster)");
}
