//! Nightly backups against the seed's `rsync -a` full copy, rsnapshot's `rsync --link-dest` and
//! restic, on the same generated tree, on the same disk, in one run, with medians and ratios.
//!
//! ```text
//! cargo bench --bench snapshot                                # ~60k files, ~2.6 GB
//! BENCH_SCALE=0.05 BENCH_RUNS=1 cargo bench --bench snapshot  # a twentieth, for a quick look
//! BENCH_DIR=/mnt/ssd/bench cargo bench --bench snapshot       # where the trees go
//! ```
//!
//! Needs `rsync`, `restic` (0.14 or later) and GNU time (`/usr/bin/time`) installed.
//!
//! The tree: 60,000 x SCALE small text-like files of 1-32 KiB (partly compressible) in 200
//! directories, 200 x SCALE shards of 1-8 MiB (incompressible), 10 x SCALE byte-identical
//! copies of shards under other names, and 3 incompressible checkpoints of 200 MiB x SCALE.
//! Each run, with fresh repositories and backup directories, the tools interleaved (their order
//! rotates from run to run):
//! - first backup of the tree;
//! - the 1% change: 1% of the small files rewritten (new content and size), 0.2% deleted, 0.2%
//!   added, and 4 KiB inserted in the middle of one checkpoint; then the second backup;
//! - a third backup with nothing changed;
//! - the size of each repository (`du -sb`, which counts a hard-linked file once);
//! - restore of one small file from the latest backup into a fresh directory, restore of the
//!   whole tree into a fresh directory;
//! - full verify: labpool `check` reading all data, `restic check --read-data`. A plain copy
//!   has nothing to verify against.
//!
//! Every operation runs as its own process under `/usr/bin/time -f %M` (labpool's by re-running
//! this binary with `BENCH_SNAPSHOT_CHILD`), timed by wall clock after a `sync`; peak memory is
//! the child's maximum RSS. The source is in the page cache for every tool alike (it was just
//! written). rsync writes without `fsync`; labpool and restic sync their packs, so the "+ sync"
//! rows add the flush of what a tool left dirty.
//!
//! This file runs the measurements and prints the table; the tree is in `snapshot/tree.rs`,
//! the timing of one process in `snapshot/timing.rs`, the tools in `snapshot/peers.rs` and
//! labpool's child process in `snapshot/child.rs`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

#[path = "snapshot/child.rs"]
mod child;
#[path = "common.rs"]
mod common;
#[path = "snapshot/peers.rs"]
mod peers;
#[path = "snapshot/timing.rs"]
mod timing;
#[path = "snapshot/tree.rs"]
mod tree;

use child::{CHILD, child};
use common::{bench_base, env_num, median, rm, run, scratch_dir};
use peers::{Setup, TOOLS, Tool};
use timing::du;
use tree::{change, count, generate, sizes, undo};

/// What the table shows, per tool: a row name, its unit, and one value per run.
const ROWS: [(&str, &str); 11] = [
    ("first backup", "s"),
    ("first backup + sync", "s"),
    ("1% change backup", "s"),
    ("1% change backup + sync", "s"),
    ("no-change backup", "s"),
    ("space added by 1% change", "B"),
    ("repository after 3 backups", "B"),
    ("restore one small file", "s"),
    ("full restore (+ sync)", "s"),
    ("full verify (read all data)", "s"),
    ("peak memory, first backup", "MiB"),
];

type Figures = Vec<[Vec<f64>; 4]>;

fn record(figs: &mut Figures, row: &str, t: Tool, v: f64) {
    let i = ROWS.iter().position(|(r, _)| *r == row).unwrap();
    let j = TOOLS.iter().position(|x| *x == t).unwrap();
    figs[i][j].push(v);
}

fn show(v: f64, unit: &str) -> String {
    match unit {
        "s" if v < 1.0 => format!("{:.0} ms", v * 1e3),
        "s" => format!("{v:.2} s"),
        "B" if v >= 1e9 => format!("{:.2} GB", v / 1e9),
        "B" => format!("{:.1} MB", v / 1e6),
        _ => format!("{v:.0} {unit}"),
    }
}

/// Sanity checks (untimed): what a tool restored is what the source held.
fn same_file(a: &Path, b: &Path) {
    assert!(
        std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
        "{} differs from {}",
        b.display(),
        a.display()
    );
}

fn main() {
    if let Ok(op) = std::env::var(CHILD) {
        child(&op);
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    common::require_tools(
        "cargo bench --bench snapshot",
        &[
            ("restic", "restic"),
            ("rsync", "rsync"),
            ("/usr/bin/time", "time"),
        ],
    );
    let scale = env_num("BENCH_SCALE", 1.0);
    let runs = env_num("BENCH_RUNS", 3.0) as usize;
    let base = bench_base();
    // Source, rsync's three full copies, link-dest, restic, labpool and a full restore.
    let (n_small, n_shards, n_dups, ckpt) = sizes(scale);
    let estimate =
        (n_small as u64 * 16_896) + (n_shards + n_dups) as u64 * (9 << 19) + 3 * ckpt as u64;
    let free = nix::sys::statvfs::statvfs(&base)
        .map(|s| s.blocks_available() * s.fragment_size())
        .unwrap_or(u64::MAX);
    assert!(
        free > estimate * 9,
        "{} has {:.1} GB free; this scale needs about {:.1} GB. Lower BENCH_SCALE or set BENCH_DIR",
        base.display(),
        free as f64 / 1e9,
        estimate as f64 * 9.0 / 1e9
    );
    let dir = scratch_dir(&base, "snapshot");
    let src = dir.path().join("src");
    let t0 = Instant::now();
    let tree = generate(&src, scale);
    let (files, bytes) = count(&src);
    println!(
        "tree: {files} files, {:.2} GB (scale {scale}), generated in {:.0} s; {runs} runs",
        bytes as f64 / 1e9,
        t0.elapsed().as_secs_f64()
    );
    let restic_version = run(Command::new("restic").arg("version"));
    println!("peers: {}", restic_version.trim());
    let setup = Setup {
        exe: std::env::current_exe().unwrap(),
        src: src.clone(),
        work: dir.path().join("run"),
    };
    let mut figs: Figures = ROWS.iter().map(|_| Default::default()).collect();
    let one_file = tree.small[0].path.clone();
    for r in 0..runs {
        let t_run = Instant::now();
        rm(&setup.work);
        setup.init();
        let mut order = TOOLS;
        order.rotate_left(r % TOOLS.len());
        let mut sizes_after_first = [0.0; 4];
        let mut added = Vec::new();
        for day in 1..=3 {
            if day == 2 {
                added = change(&tree, &src);
            }
            for &t in &order {
                let ran = setup.backup(t, day);
                let row =
                    ["first backup", "1% change backup", "no-change backup"][day as usize - 1];
                record(&mut figs, row, t, ran.secs);
                if day < 3 {
                    record(
                        &mut figs,
                        &format!("{row} + sync"),
                        t,
                        ran.secs + ran.sync_secs,
                    );
                }
                if day == 1 {
                    record(&mut figs, "peak memory, first backup", t, ran.rss_mib);
                }
                if t == Tool::Labpool {
                    println!("  run {} day {day}: labpool {}", r + 1, ran.out.trim());
                }
                println!(
                    "  run {} backup {day}: {:<18} {:>8.2} s (+ sync {:.2} s), {:.0} MiB",
                    r + 1,
                    name(t),
                    ran.secs,
                    ran.sync_secs,
                    ran.rss_mib
                );
            }
            for (j, &t) in TOOLS.iter().enumerate() {
                let size = du(&setup.repo(t));
                match day {
                    1 => sizes_after_first[j] = size,
                    2 => record(
                        &mut figs,
                        "space added by 1% change",
                        t,
                        size - sizes_after_first[j],
                    ),
                    _ => record(&mut figs, "repository after 3 backups", t, size),
                }
            }
            if day == 3 {
                // Restores and checks read the changed tree; it goes back after them.
                let (want_files, want_bytes) = count(&src);
                for &t in &order {
                    let target = setup.work.join("restore-one");
                    let (ran, got) = setup.restore_one(t, &one_file, &target);
                    same_file(&one_file, &got);
                    rm(&target);
                    record(&mut figs, "restore one small file", t, ran.secs);
                    println!(
                        "  run {} restore one: {:<18} {:>8.3} s {}",
                        r + 1,
                        name(t),
                        ran.secs,
                        ran.out.trim()
                    );
                }
                for &t in &order {
                    let target = setup.work.join("restore-all");
                    let (ran, root) = setup.restore_all(t, &target);
                    record(
                        &mut figs,
                        "full restore (+ sync)",
                        t,
                        ran.secs + ran.sync_secs,
                    );
                    let got = count(&root);
                    assert_eq!(
                        got,
                        (want_files, want_bytes),
                        "{} restored another tree",
                        name(t)
                    );
                    if r == 0 && t == Tool::Labpool {
                        // Once: every byte, not just the counts.
                        run(Command::new("diff").arg("-rq").arg(&src).arg(&root));
                    }
                    same_file(&tree.checkpoints[0], &root.join("checkpoints/step-0.pt"));
                    println!(
                        "  run {} restore all: {:<18} {:>8.2} s (+ sync {:.2} s), {:.0} MiB",
                        r + 1,
                        name(t),
                        ran.secs,
                        ran.sync_secs,
                        ran.rss_mib
                    );
                    rm(&target);
                }
                for &t in &order {
                    if let Some(ran) = setup.verify(t) {
                        record(&mut figs, "full verify (read all data)", t, ran.secs);
                        println!(
                            "  run {} verify: {:<18} {:>8.2} s, {:.0} MiB {}",
                            r + 1,
                            name(t),
                            ran.secs,
                            ran.rss_mib,
                            ran.out.trim()
                        );
                    }
                }
            }
        }
        undo(&tree, &added);
        rm(&setup.work);
        println!(
            "  run {} took {:.0} s",
            r + 1,
            t_run.elapsed().as_secs_f64()
        );
    }
    print_table(figs, runs);
}

fn name(t: Tool) -> &'static str {
    match t {
        Tool::Labpool => "labpool",
        Tool::Rsync => "rsync",
        Tool::LinkDest => "rsync --link-dest",
        Tool::Restic => "restic",
    }
}

fn print_table(figs: Figures, runs: usize) {
    println!();
    println!(
        "medians of {runs} runs; ratios are peer / labpool (above 1: labpool faster or smaller)"
    );
    println!(
        "| {:<28} | {:>10} | {:>10} | {:>17} | {:>10} | {:>7} | {:>9} | {:>7} |",
        "row", "labpool", "rsync", "rsync --link-dest", "restic", "rsync", "link-dest", "restic"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for ((row, unit), per_tool) in ROWS.iter().zip(figs) {
        let m: Vec<Option<f64>> = per_tool
            .into_iter()
            .map(|v| (!v.is_empty()).then(|| median(v)))
            .collect();
        let cell = |v: Option<f64>| v.map(|v| show(v, unit)).unwrap_or_else(|| "n/a".into());
        let ratio = |v: Option<f64>| match (v, m[0]) {
            (Some(p), Some(l)) if l > 0.0 => format!("{:.2}x", p / l),
            _ => "-".into(),
        };
        println!(
            "| {:<28} | {:>10} | {:>10} | {:>17} | {:>10} | {:>7} | {:>9} | {:>7} |",
            row,
            cell(m[0]),
            cell(m[1]),
            cell(m[2]),
            cell(m[3]),
            ratio(m[1]),
            ratio(m[2]),
            ratio(m[3])
        );
    }
}
