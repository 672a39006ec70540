//! Quota usage scans against `du` and `find`, and the scratch purge against `find -delete`, on
//! the same generated trees, on the same disk, in one run, with medians and ratios.
//!
//! ```text
//! cargo bench --bench quota                                # a tree of 1,006,242 entries
//! BENCH_SCALE=0.05 BENCH_RUNS=1 cargo bench --bench quota  # a twentieth, for a quick look
//! BENCH_DIR=/mnt/scratch/bench cargo bench --bench quota   # where the trees go
//! BENCH_QUOTA_THREADS=32 cargo bench --bench quota         # labpool's walk threads (16)
//! BENCH_QUOTA_ROWS=scan cargo bench --bench quota           # only the scan (or purge) rows
//! ```
//!
//! Run it as root: the cold rows drop the page cache (`echo 3 > /proc/sys/vm/drop_caches`)
//! before every timed tool, and the tree's files belong to 40 uids. Without root only the warm
//! rows run. Needs GNU `du`, GNU `find` and GNU time (`/usr/bin/time`).
//!
//! The scan tree, like users' scratch directories: `users/uNN/projN/runNNN/`, 2,000 x SCALE run
//! directories of 100 to 900 files (500 on average; 1,000,000 x SCALE files): 30% of the files
//! empty, 68% of 1 B to 4 KiB, 2% of 4 to 64 KiB, each user's owned by their own uid; in every
//! run directory one symlink (`latest`) and one second hard link to a file. It is kept between
//! runs of the benchmark, with a marker beside it (`scan-N.done`), and reused when the marker is
//! there: delete `$BENCH_DIR/labpool-bench-quota` to get the disk space back.
//!
//! Scan rows: labpool's [`scan`] (16 threads by default), `du -s -x -B1`, `find -xdev` printing
//! one byte per entry (names only: GNU find does not stat an entry it needs nothing of), and
//! `find -xdev -printf '%U %b\n'` (a stat of every entry, what a find-based per-user usage
//! script runs). Every tool runs as its own process (labpool's through this binary re-running
//! itself) under `/usr/bin/time -f %M` for its peak RSS, timed by wall clock. Cold: `sync` and
//! drop the caches right before each tool. Warm: each tool runs once untimed, then timed. The
//! rate is the tree's entries (every name, the root included, as `find` lists them) over the
//! time, the same count for every tool. labpool's entries, allocated bytes and apparent bytes
//! are checked against the generator, `du -B1` and `du -b`.
//!
//! Purge rows: two twin trees of 200,000 x SCALE regular files each (the same layout, sizes and
//! owners), every other file of each tree (about half) to be purged. A file's ctime cannot be
//! set back, and labpool ages a file by the newest of its atime, mtime and ctime, where `find
//! -atime +30` looks at atime alone; so each tool gets the twin that shows it the same ages:
//! - `find`'s twin: the files to go have atime and mtime set 40 days back, the rest are fresh.
//!   Timed: `find ROOT -xdev -type f -atime +30 -delete` (the issue's command, kept to regular
//!   files and to one file system, as labpool is).
//! - labpool's twin: the files to go are fresh, the rest have atime and mtime set 39 days ahead;
//!   labpool plans and executes with `now` 40 days ahead and a 30-day limit, so a fresh file is
//!   40 days old and a kept one 1 day old. Timed: `plan` and `execute` in one process, the audit
//!   log (one JSON line per file removed) written through a `BufWriter` to a file beside the
//!   tree and fsynced at the end.
//!
//! Both tools then remove the same number of files; that is checked, and so is what is left.
//! The twins are generated afresh for every timed purge (a purge consumes its tree) and removed
//! after it; which tool goes first alternates from run to run. Cold: `sync` and drop the caches
//! before the tool; warm: drop the caches, then `du -s -x` over the tool's tree (untimed), so
//! its directories and inodes are cached and nothing the other tool did is. The "+ sync" rows
//! add the flush of the removals the tool left dirty.
//!
//! This file checks the disk, makes the scan tree and prints the tables; the trees are in
//! `quota/tree.rs`, the timing of one process in `quota/timing.rs`, labpool's child process in
//! `quota/child.rs`, the rows in `quota/scan_rows.rs` and `quota/purge_rows.rs`, and how
//! figures are shown in `quota/table.rs`.

use labpool_quotas::scan::ScanOptions;
use std::process::Command;

#[path = "quota/child.rs"]
mod child;
#[path = "common.rs"]
mod common;
#[path = "quota/purge_rows.rs"]
mod purge_rows;
#[path = "quota/scan_rows.rs"]
mod scan_rows;
#[path = "quota/table.rs"]
mod table;
#[path = "quota/timing.rs"]
mod timing;
#[path = "quota/tree.rs"]
mod tree;

use child::{CHILD, child};
use common::{bench_base, env_num, run};
use purge_rows::purge_rows;
use scan_rows::scan_rows;
use table::thousands;
use timing::drop_caches;
use tree::scan_tree;

fn main() {
    if let Ok(op) = std::env::var(CHILD) {
        child(&op);
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let scale = env_num("BENCH_SCALE", 1.0);
    let runs = env_num("BENCH_RUNS", 3.0) as usize;
    let threads = env_num("BENCH_QUOTA_THREADS", ScanOptions::default().threads);
    let base = bench_base().join("labpool-bench-quota");
    std::fs::create_dir_all(&base).unwrap();
    let scan_dirs = ((2000.0 * scale) as usize).max(2);
    let purge_dirs = ((400.0 * scale) as usize).max(2);
    // About 4 KiB a file on disk: the scan tree (unless kept) and two purge twins at a time.
    let need_bytes = (scan_dirs + 2 * purge_dirs) as u64 * 500 * 4_600;
    let need_inodes = (scan_dirs + 2 * purge_dirs) as u64 * 510;
    let vfs = nix::sys::statvfs::statvfs(&base).unwrap();
    let free = vfs.blocks_available() * vfs.fragment_size();
    let free_inodes = vfs.files_available();
    assert!(
        free > need_bytes && free_inodes > need_inodes,
        "{} has {:.1} GB and {} inodes free; this scale needs about {:.1} GB and {} inodes. \
         Lower BENCH_SCALE or set BENCH_DIR",
        base.display(),
        free as f64 / 1e9,
        free_inodes,
        need_bytes as f64 / 1e9,
        need_inodes
    );
    let cold_ok = drop_caches();
    if !cold_ok {
        println!("cannot drop the caches (not root?): warm rows only");
    }
    let conditions: Vec<bool> = if cold_ok {
        vec![true, false]
    } else {
        vec![false]
    };
    let exe = std::env::current_exe().unwrap();

    let (root, made, gen_secs) = scan_tree(&base, scan_dirs);
    match gen_secs {
        Some(s) => println!(
            "scan tree: {} entries ({} files, {} run directories) made in {s:.0} s at {}",
            thousands(made.names),
            thousands(made.files),
            scan_dirs,
            root.display()
        ),
        None => println!(
            "scan tree: {} entries ({} files, {} run directories) reused from {} (marker {}.done)",
            thousands(made.names),
            thousands(made.files),
            scan_dirs,
            root.display(),
            root.display()
        ),
    }
    println!(
        "peers: {}, {}; labpool walk threads: {threads}; {runs} runs",
        run(Command::new("du").arg("--version"))
            .lines()
            .next()
            .unwrap(),
        run(Command::new("find").arg("--version"))
            .lines()
            .next()
            .unwrap()
    );

    let rows = std::env::var("BENCH_QUOTA_ROWS").unwrap_or_else(|_| "all".into());
    let mut tables = vec![];
    if rows != "purge" {
        tables.extend(scan_rows(&exe, &root, &made, threads, runs, &conditions));
    }
    if rows != "scan" {
        tables.push(String::new());
        tables.extend(purge_rows(
            &exe,
            &base,
            purge_dirs,
            threads,
            runs,
            &conditions,
        ));
    }
    println!();
    println!(
        "medians of {runs} runs; ratios are peer time / labpool time (above 1: labpool faster), \
         in brackets the lowest and highest within one run"
    );
    println!();
    for line in tables {
        println!("{line}");
    }
    println!(
        "the scan tree stays at {} for the next run; remove {} to free its space",
        root.display(),
        base.display()
    );
}
