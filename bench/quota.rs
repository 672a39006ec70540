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

use labpool_quotas::Progress;
use labpool_quotas::purge::{self, PurgeContext, PurgePolicy};
use labpool_quotas::scan::{ScanOptions, scan};
use std::ffi::OsString;
use std::fs::FileTimes;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "common.rs"]
mod common;
use common::{bench_base, env_num, median, rm, run, xorshift};

const CHILD: &str = "BENCH_QUOTA_CHILD";
const DAY: u64 = 86_400;
const USERS: usize = 40;
/// The production anchor: Robinhood's policy run, end to end.
const ROBINHOOD: f64 = 4_800.0;

/// How a tree's file times are set.
#[derive(Clone, Copy, PartialEq)]
enum Ages {
    /// All fresh (the scan tree).
    Fresh,
    /// `find`'s twin: every other file (the ones to go) 40 days back.
    OldBack,
    /// labpool's twin: every other file (the ones to keep) 39 days ahead.
    KeepAhead,
}

/// What a generated tree holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Made {
    /// Every name, the root included (what `find` lists).
    names: u64,
    /// Regular file names.
    files: u64,
    /// Files to be purged (every other one).
    old: u64,
    /// Second names of hard-linked files (counted once by `du` and labpool).
    extra_links: u64,
    /// Apparent bytes of the regular files.
    file_bytes: u64,
}

/// The run directory `i`: where it goes and its owner.
fn run_dir(i: usize) -> (PathBuf, u32) {
    let user = i % USERS;
    let rel = format!(
        "users/u{user:02}/proj{}/run{:03}",
        (i / USERS) % 5,
        i / (USERS * 5)
    );
    (PathBuf::from(rel), 10_000 + user as u32)
}

/// Files in run directory `i` of `n`: 500 on average, between 100 and 900; pairs sum to 1,000.
fn files_in(i: usize, n: usize) -> usize {
    if n % 2 == 1 && i == n - 1 {
        return 500;
    }
    let mut x = ((i / 2) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let d = (xorshift(&mut x) % 401) as usize;
    if i.is_multiple_of(2) {
        500 + d
    } else {
        500 - d
    }
}

/// Writes a tree of `n_dirs` run directories under `root` on 8 threads. `links`: a symlink and
/// a second hard link in each run directory.
fn generate(root: &Path, n_dirs: usize, links: bool, ages: Ages) -> Made {
    std::fs::create_dir_all(root).unwrap();
    let now = SystemTime::now();
    let back = now - Duration::from_secs(40 * DAY);
    let ahead = now + Duration::from_secs(39 * DAY);
    let filler = vec![b'x'; 64 * 1024];
    let next = AtomicUsize::new(0);
    let made = std::sync::Mutex::new(Made::default());
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let mut m = Made::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n_dirs {
                        break;
                    }
                    let (rel, uid) = run_dir(i);
                    let dir = root.join(&rel);
                    std::fs::create_dir_all(&dir).unwrap();
                    let mut rng = (i as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
                    let n = files_in(i, n_dirs);
                    for j in 0..n {
                        let r = xorshift(&mut rng);
                        let len = match r % 100 {
                            0..30 => 0,
                            30..98 => 1 + (r >> 8) % 4096,
                            _ => 4096 + (r >> 8) % 61_440,
                        } as usize;
                        let ext = ["log", "json", "pt", "txt", "csv"][j % 5];
                        let p = dir.join(format!("f{j:05}.{ext}"));
                        let mut f = std::fs::File::create(&p).unwrap();
                        if len > 0 {
                            f.write_all(&filler[..len]).unwrap();
                        }
                        std::os::unix::fs::fchown(&f, Some(uid), Some(uid)).unwrap();
                        let old = j % 2 == 0;
                        let t = match ages {
                            Ages::OldBack if old => Some(back),
                            Ages::KeepAhead if !old => Some(ahead),
                            _ => None,
                        };
                        if let Some(t) = t {
                            f.set_times(FileTimes::new().set_accessed(t).set_modified(t))
                                .unwrap();
                        }
                        m.files += 1;
                        m.old += old as u64;
                        m.file_bytes += len as u64;
                    }
                    m.names += n as u64;
                    if links {
                        let latest = dir.join("latest");
                        std::os::unix::fs::symlink("f00000.log", &latest).unwrap();
                        std::os::unix::fs::lchown(&latest, Some(uid), Some(uid)).unwrap();
                        std::fs::hard_link(dir.join("f00001.json"), dir.join("config.json"))
                            .unwrap();
                        m.names += 2;
                        m.extra_links += 1;
                    }
                }
                let mut all = made.lock().unwrap();
                all.names += m.names;
                all.files += m.files;
                all.old += m.old;
                all.extra_links += m.extra_links;
                all.file_bytes += m.file_bytes;
            });
        }
    });
    // The directories above the files: users/uNN/projN/runNNN, their owners' where one user.
    let mut dirs = std::collections::BTreeSet::new();
    for i in 0..n_dirs {
        let (rel, uid) = run_dir(i);
        let mut p = PathBuf::new();
        for (k, c) in rel.components().enumerate() {
            p.push(c);
            dirs.insert((p.clone(), if k == 0 { 0 } else { uid }));
        }
    }
    for (d, uid) in &dirs {
        std::os::unix::fs::chown(root.join(d), Some(*uid), Some(*uid)).unwrap();
    }
    let mut m = made.into_inner().unwrap();
    m.names += dirs.len() as u64 + 1;
    m
}

fn sync() {
    nix::unistd::sync();
}

/// Empties the page cache, dentries and inodes; false without the right (not root).
fn drop_caches() -> bool {
    sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// One timed process: wall seconds, the flush after it, its peak RSS and what it printed.
struct Ran {
    secs: f64,
    sync_secs: f64,
    rss_mib: f64,
    out: String,
}

/// Runs `program args` under GNU time, timing it by wall clock; `cold` drops the caches first.
fn measure(program: &Path, args: &[OsString], env: Option<(&str, &str)>, cold: bool) -> Ran {
    let rss_file =
        std::env::temp_dir().join(format!("labpool-bench-quota-rss-{}", std::process::id()));
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(program)
        .args(args);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    sync();
    if cold {
        assert!(drop_caches(), "dropping the caches needs root");
    }
    let t0 = Instant::now();
    let out = run(&mut cmd);
    let secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    sync();
    let sync_secs = t1.elapsed().as_secs_f64();
    let rss = std::fs::read_to_string(&rss_file).unwrap();
    let _ = std::fs::remove_file(&rss_file);
    let kib: f64 = rss.lines().last().unwrap().trim().parse().unwrap();
    Ran {
        secs,
        sync_secs,
        rss_mib: kib / 1024.0,
        out,
    }
}

/// labpool's side, in its own process: `BENCH_QUOTA_CHILD=scan exe ROOT THREADS` or
/// `BENCH_QUOTA_CHILD=purge exe ROOT NOW AUDIT THREADS`.
fn child(op: &str) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(&args[0]);
    let progress = Progress::default();
    match op {
        "scan" => {
            let options = ScanOptions {
                threads: args[1].parse().unwrap(),
                ..Default::default()
            };
            let r = scan(root, &options, &progress).unwrap();
            assert!(r.error_count == 0, "scan errors: {:?}", r.errors);
            let t = r.total();
            println!("{} {} {} {}", t.files, t.bytes, t.apparent, r.users.len());
        }
        "purge" => {
            let ctx = PurgeContext {
                now: args[1].parse().unwrap(),
                protected: vec![],
            };
            let policy = PurgePolicy {
                threads: args[3].parse().unwrap(),
                ..Default::default()
            };
            let t0 = Instant::now();
            let plan = purge::plan(root, &policy, &ctx, &progress).unwrap();
            assert!(plan.errors.is_empty(), "plan errors: {:?}", plan.errors);
            let planned = t0.elapsed().as_secs_f64();
            let file = std::fs::File::create(&args[2]).unwrap();
            let mut audit = std::io::BufWriter::new(file);
            let done = purge::execute(&plan, &ctx, &mut audit, &progress).unwrap();
            audit.into_inner().unwrap().sync_all().unwrap();
            assert!(done.skipped.is_empty(), "skipped: {:?}", done.skipped);
            println!(
                "{} {} {} {:.3} {:.3}",
                plan.delete.len(),
                done.removed.len(),
                plan.warn.len(),
                planned,
                t0.elapsed().as_secs_f64() - planned
            );
        }
        other => panic!("unknown child operation {other}"),
    }
}

/// Regular files left under `root`.
fn count_files(root: &Path) -> u64 {
    let out = run(Command::new("find")
        .arg(root)
        .args(["-xdev", "-type", "f", "-printf", "."]));
    out.len() as u64
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum ScanTool {
    Labpool,
    Du,
    Find,
    FindStat,
}

const SCAN_TOOLS: [ScanTool; 4] = [
    ScanTool::Labpool,
    ScanTool::Du,
    ScanTool::Find,
    ScanTool::FindStat,
];

fn scan_name(t: ScanTool) -> &'static str {
    match t {
        ScanTool::Labpool => "labpool scan",
        ScanTool::Du => "du -s -x",
        ScanTool::Find => "find -xdev",
        ScanTool::FindStat => "find -printf '%U %b'",
    }
}

/// Runs one scan; returns the measurement and the entries it saw (for `find`, its lines).
fn scan_once(t: ScanTool, exe: &Path, root: &Path, threads: usize, cold: bool) -> Ran {
    let r: OsString = root.into();
    let s = |x: &str| OsString::from(x);
    match t {
        ScanTool::Labpool => measure(
            exe,
            &[r, s(&threads.to_string())],
            Some((CHILD, "scan")),
            cold,
        ),
        ScanTool::Du => measure(
            Path::new("du"),
            &[s("-s"), s("-x"), s("-B1"), r],
            None,
            cold,
        ),
        ScanTool::Find => measure(
            Path::new("find"),
            &[r, s("-xdev"), s("-printf"), s(".")],
            None,
            cold,
        ),
        ScanTool::FindStat => measure(
            Path::new("find"),
            &[r, s("-xdev"), s("-printf"), s("%U %b\n")],
            None,
            cold,
        ),
    }
}

/// Checks what a scan tool reported against the tree.
fn check_scan(t: ScanTool, ran: &Ran, made: &Made, du_bytes: &mut Option<u64>) {
    match t {
        ScanTool::Labpool => {
            let f: Vec<u64> = ran
                .out
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            assert_eq!(
                f[0],
                made.names - made.extra_links,
                "labpool's entries: every name, a hard-linked file once"
            );
            assert_eq!(f[3], USERS as u64 + 1, "uids: 40 users and root");
            if let Some(b) = du_bytes {
                assert_eq!(f[1], *b, "labpool's allocated bytes against du -B1");
            }
        }
        ScanTool::Du => {
            let b: u64 = ran.out.split_whitespace().next().unwrap().parse().unwrap();
            if let Some(prev) = du_bytes {
                assert_eq!(*prev, b, "du changed its mind");
            }
            *du_bytes = Some(b);
        }
        ScanTool::Find => assert_eq!(ran.out.len() as u64, made.names, "find's entries"),
        ScanTool::FindStat => assert_eq!(ran.out.lines().count() as u64, made.names),
    }
}

/// The scan tree, made once and kept: `(root, what it holds, seconds to make it or None)`.
fn scan_tree(base: &Path, n_dirs: usize) -> (PathBuf, Made, Option<f64>) {
    let root = base.join(format!("scan-{n_dirs}"));
    let marker = base.join(format!("scan-{n_dirs}.done"));
    if let Ok(text) = std::fs::read_to_string(&marker)
        && root.is_dir()
    {
        let f: Vec<u64> = text
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let made = Made {
            names: f[0],
            files: f[1],
            old: f[2],
            extra_links: f[3],
            file_bytes: f[4],
        };
        return (root, made, None);
    }
    rm(&root);
    let t0 = Instant::now();
    let made = generate(&root, n_dirs, true, Ages::Fresh);
    sync();
    let secs = t0.elapsed().as_secs_f64();
    std::fs::write(
        &marker,
        format!(
            "{} {} {} {} {}\n",
            made.names, made.files, made.old, made.extra_links, made.file_bytes
        ),
    )
    .unwrap();
    (root, made, Some(secs))
}

fn secs_since_epoch() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// One purge: each tool on its own freshly generated twin. Returns labpool's run, its plan and
/// execute seconds, `find`'s run, what each twin held, and the seconds to make the twins.
fn purge_once(
    exe: &Path,
    work: &Path,
    n_dirs: usize,
    threads: usize,
    cold: bool,
    labpool_first: bool,
) -> (Ran, f64, f64, Ran, Made, f64) {
    let lp_root = work.join("labpool");
    let find_root = work.join("find");
    rm(&lp_root);
    rm(&find_root);
    // Making files here right after removing as many runs several times slower (6 s against
    // 40 s for 100,000 files) unless the caches are dropped in between.
    drop_caches();
    let t0 = Instant::now();
    let lp_made = generate(&lp_root, n_dirs, false, Ages::KeepAhead);
    let find_made = generate(&find_root, n_dirs, false, Ages::OldBack);
    let gen_s = t0.elapsed().as_secs_f64();
    assert_eq!(lp_made, find_made, "the twins differ");
    // Warm: the caches dropped (what the other tool removed, or the generator wrote, is gone
    // from them), then the tree read by `du`, so its directories and inodes are in the cache.
    let warm = |root: &Path| {
        if !cold {
            drop_caches();
            run(Command::new("du").arg("-s").arg("-x").arg(root));
        }
    };
    let audit = work.join("purge-audit.jsonl");
    let mut lp = None;
    let mut fd = None;
    for k in 0..2 {
        if (k == 0) == labpool_first {
            warm(&lp_root);
            let now = secs_since_epoch() + 40 * DAY as i64;
            let args: Vec<OsString> = vec![
                lp_root.clone().into(),
                now.to_string().into(),
                audit.clone().into(),
                threads.to_string().into(),
            ];
            lp = Some(measure(exe, &args, Some((CHILD, "purge")), cold));
        } else {
            warm(&find_root);
            let args: Vec<OsString> = vec![
                find_root.clone().into(),
                "-xdev".into(),
                "-type".into(),
                "f".into(),
                "-atime".into(),
                "+30".into(),
                "-delete".into(),
            ];
            fd = Some(measure(Path::new("find"), &args, None, cold));
        }
    }
    let (lp, fd) = (lp.unwrap(), fd.unwrap());
    let f: Vec<f64> = lp
        .out
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(f[0] as u64, lp_made.old, "labpool planned another set");
    assert_eq!(f[1] as u64, lp_made.old, "labpool removed another set");
    assert_eq!(f[2] as u64, 0, "nothing is near its age");
    let audit_lines = std::fs::read_to_string(&audit).unwrap().lines().count() as u64;
    assert_eq!(audit_lines, lp_made.old, "one audit line per removal");
    let keep = lp_made.files - lp_made.old;
    assert_eq!(count_files(&lp_root), keep, "labpool left another set");
    assert_eq!(count_files(&find_root), keep, "find left another set");
    rm(&lp_root);
    rm(&find_root);
    let _ = std::fs::remove_file(&audit);
    (lp, f[3], f[4], fd, lp_made, gen_s)
}

/// `12.34 s, 81,700/s`
fn cell(secs: f64, n: u64) -> String {
    let t = if secs < 1.0 {
        format!("{:.0} ms", secs * 1e3)
    } else {
        format!("{secs:.2} s")
    };
    format!("{t}, {}/s", thousands((n as f64 / secs).round() as u64))
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

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

/// `1.95x (1.27-2.52)`: the ratio of the medians, and the lowest and highest within a run.
fn ratio(peer: &[f64], labpool: &[f64]) -> String {
    let m = median(peer.to_vec()) / median(labpool.to_vec());
    let per_run: Vec<f64> = peer.iter().zip(labpool).map(|(p, l)| p / l).collect();
    if per_run.len() < 2 {
        return format!("{m:.2}x");
    }
    let lo = per_run.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = per_run.iter().cloned().fold(0.0, f64::max);
    format!("{m:.2}x ({lo:.2}-{hi:.2})")
}

fn cond_name(cold: bool) -> &'static str {
    if cold { "cold" } else { "warm" }
}

/// The scan rows: each tool cold and warm, `runs` times; returns the table.
fn scan_rows(
    exe: &Path,
    root: &Path,
    made: &Made,
    threads: usize,
    runs: usize,
    conditions: &[bool],
) -> Vec<String> {
    // Per condition and tool, seconds; peak memory from the first condition (cold if it runs).
    let mut secs: Vec<Vec<Vec<f64>>> = vec![vec![vec![]; 4]; 2];
    let mut rss: Vec<Vec<f64>> = vec![vec![]; 4];
    let mut du_bytes = None;
    for r in 0..runs {
        let mut order = SCAN_TOOLS;
        order.rotate_left(r % 4);
        for &cold in conditions {
            for &t in &order {
                if !cold {
                    scan_once(t, exe, root, threads, false);
                }
                let ran = scan_once(t, exe, root, threads, cold);
                check_scan(t, &ran, made, &mut du_bytes);
                let j = SCAN_TOOLS.iter().position(|x| *x == t).unwrap();
                secs[cold as usize][j].push(ran.secs);
                if cold == conditions[0] {
                    rss[j].push(ran.rss_mib);
                }
                println!(
                    "  run {} scan {}: {:<22} {:>8.2} s  {:>10}/s  {:.0} MiB",
                    r + 1,
                    cond_name(cold),
                    scan_name(t),
                    ran.secs,
                    thousands((made.names as f64 / ran.secs) as u64),
                    ran.rss_mib
                );
            }
        }
        if r == 0 {
            // Once, untimed: labpool agrees with du, and the apparent bytes with du -b.
            let lp = scan_once(ScanTool::Labpool, exe, root, threads, false);
            check_scan(ScanTool::Labpool, &lp, made, &mut du_bytes);
            let f: Vec<u64> = lp
                .out
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let du_b: u64 = run(Command::new("du").args(["-s", "-x", "-b"]).arg(root))
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(f[2], du_b, "labpool's apparent bytes against du -b");
            println!(
                "  check: labpool {} entries ({} names less {} second hard links), {} bytes \
                 allocated = du -B1 {}, {} apparent = du -b {}; {} uids",
                thousands(f[0]),
                thousands(made.names),
                made.extra_links,
                thousands(f[1]),
                thousands(du_bytes.unwrap()),
                thousands(f[2]),
                thousands(du_b),
                f[3]
            );
        }
    }
    let mut out = vec![
        format!(
            "| scan, {} entries | labpool scan | `du -s -x` | `find -xdev` | `find -printf '%U %b'` | vs `du` | vs `find` | vs `find %U %b` |",
            thousands(made.names)
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- |".into(),
    ];
    for &cold in conditions {
        let v = &secs[cold as usize];
        let m: Vec<f64> = v.iter().map(|x| median(x.clone())).collect();
        out.push(format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            cond_name(cold),
            cell(m[0], made.names),
            cell(m[1], made.names),
            cell(m[2], made.names),
            cell(m[3], made.names),
            ratio(&v[1], &v[0]),
            ratio(&v[2], &v[0]),
            ratio(&v[3], &v[0])
        ));
    }
    let m: Vec<f64> = rss.iter().map(|v| median(v.clone())).collect();
    out.push(format!(
        "| peak memory, {} | {:.0} MiB | {:.0} MiB | {:.0} MiB | {:.0} MiB | {:.2}x | {:.2}x | {:.2}x |",
        cond_name(conditions[0]),
        m[0],
        m[1],
        m[2],
        m[3],
        m[1] / m[0],
        m[2] / m[0],
        m[3] / m[0]
    ));
    out
}

/// The purge rows: labpool and `find -delete` on fresh twins, cold and warm, `runs` times;
/// returns the table and the anchor line.
fn purge_rows(
    exe: &Path,
    base: &Path,
    purge_dirs: usize,
    threads: usize,
    runs: usize,
    conditions: &[bool],
) -> Vec<String> {
    // Per condition, [labpool, find] seconds, and the same + sync.
    let work = base.join("purge");
    std::fs::create_dir_all(&work).unwrap();
    let mut secs: Vec<Vec<Vec<f64>>> = vec![vec![vec![]; 2]; 2];
    let mut synced: Vec<Vec<Vec<f64>>> = vec![vec![vec![]; 2]; 2];
    let mut rss: Vec<Vec<f64>> = vec![vec![]; 2];
    let mut phases: Vec<(f64, f64)> = vec![];
    let mut made = Made::default();
    for r in 0..runs {
        for &cold in conditions {
            let t0 = Instant::now();
            let (lp, plan_s, exec_s, fd, m, gen_s) =
                purge_once(exe, &work, purge_dirs, threads, cold, r % 2 == 0);
            made = m;
            for (j, ran) in [&lp, &fd].into_iter().enumerate() {
                secs[cold as usize][j].push(ran.secs);
                synced[cold as usize][j].push(ran.secs + ran.sync_secs);
                if cold == conditions[0] {
                    rss[j].push(ran.rss_mib);
                }
            }
            if cold == conditions[0] {
                phases.push((plan_s, exec_s));
            }
            println!(
                "  run {} purge {}: labpool {:.2} s (+ sync {:.2} s; plan {plan_s:.2} s, \
                 execute {exec_s:.2} s), find -delete {:.2} s (+ sync {:.2} s); {} of {} \
                 files removed by each; twins made in {gen_s:.0} s, {:.0} s in all",
                r + 1,
                cond_name(cold),
                lp.secs,
                lp.sync_secs,
                fd.secs,
                fd.sync_secs,
                thousands(m.old),
                thousands(m.files),
                t0.elapsed().as_secs_f64()
            );
        }
    }
    rm(&work);
    let mut out = vec![
        format!(
            "| purge, {} files, {} removed | labpool plan + execute | `find -type f -atime +30 -delete` | vs `find` |",
            thousands(made.files),
            thousands(made.old)
        ),
        "| --- | --- | --- | --- |".into(),
    ];
    for &cold in conditions {
        for (label, v) in [("", &secs), (" + sync", &synced)] {
            let v = &v[cold as usize];
            out.push(format!(
                "| {}{label} | {} | {} | {} |",
                cond_name(cold),
                cell(median(v[0].clone()), made.old),
                cell(median(v[1].clone()), made.old),
                ratio(&v[1], &v[0])
            ));
        }
    }
    let m: Vec<f64> = rss.iter().map(|v| median(v.clone())).collect();
    out.push(format!(
        "| peak memory, {} | {:.0} MiB | {:.0} MiB | {:.2}x |",
        cond_name(conditions[0]),
        m[0],
        m[1],
        m[1] / m[0]
    ));
    let lp = median(synced[conditions[0] as usize][0].clone());
    out.push(String::new());
    out.push(format!(
        "labpool {} purge, medians: plan {:.2} s, execute {:.2} s",
        cond_name(conditions[0]),
        median(phases.iter().map(|p| p.0).collect()),
        median(phases.iter().map(|p| p.1).collect())
    ));
    out.push(format!(
        "anchor: Robinhood about {}/s end to end; labpool's {} purge + sync: {}/s removed, \
         {}/s examined ({:.1}x, {:.1}x)",
        thousands(ROBINHOOD as u64),
        cond_name(conditions[0]),
        thousands((made.old as f64 / lp) as u64),
        thousands((made.files as f64 / lp) as u64),
        made.old as f64 / lp / ROBINHOOD,
        made.files as f64 / lp / ROBINHOOD
    ));
    out
}
