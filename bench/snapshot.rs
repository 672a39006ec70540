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

use labpool_snapshots::restore::{open_dir_nofollow, restore_node};
use labpool_snapshots::{BackupOptions, Progress, Repository, RestoreOptions};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[path = "common.rs"]
mod common;
use common::{bench_base, env_num, median, rm, run, scratch_dir, xorshift};

const CHILD: &str = "BENCH_SNAPSHOT_CHILD";

/// Incompressible filler, fast to make: a 64-bit pattern per file.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = Vec::with_capacity(len + 8);
    while buf.len() < len {
        buf.extend_from_slice(&xorshift(&mut x).to_le_bytes());
    }
    buf.truncate(len);
    buf
}

const WORDS: [&str; 64] = [
    "epoch",
    "loss",
    "acc",
    "train",
    "val",
    "step",
    "lr",
    "batch",
    "grad",
    "norm",
    "time",
    "gpu",
    "node",
    "rank",
    "mem",
    "iter",
    "warmup",
    "decay",
    "sample",
    "token",
    "image",
    "label",
    "mask",
    "layer",
    "head",
    "dim",
    "seed",
    "run",
    "eval",
    "test",
    "top1",
    "top5",
    "bleu",
    "f1",
    "recall",
    "precision",
    "ckpt",
    "save",
    "load",
    "shard",
    "worker",
    "queue",
    "wait",
    "done",
    "start",
    "stop",
    "error",
    "warn",
    "info",
    "debug",
    "user",
    "group",
    "job",
    "task",
    "data",
    "set",
    "path",
    "file",
    "size",
    "hash",
    "rate",
    "mean",
    "std",
    "max",
];

/// Text-like filler (log and CSV lines): words from a small vocabulary and random hex numbers,
/// so zstd shrinks it by about half, not to nothing.
fn text(seed: u64, len: usize) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = Vec::with_capacity(len + 128);
    while buf.len() < len {
        let w = xorshift(&mut x);
        for k in 0..6 {
            buf.extend_from_slice(WORDS[((w >> (k * 6)) & 63) as usize].as_bytes());
            buf.push(b' ');
        }
        let mut n = xorshift(&mut x);
        for _ in 0..16 {
            buf.push(HEX[(n & 15) as usize]);
            n >>= 4;
        }
        buf.push(b'\n');
    }
    buf.truncate(len);
    buf
}

/// One small file: where, and how to make it again.
struct Small {
    path: PathBuf,
    seed: u64,
    len: usize,
}

impl Small {
    fn write(&self) {
        std::fs::write(&self.path, text(self.seed, self.len)).unwrap();
    }
}

struct Tree {
    small: Vec<Small>,
    checkpoints: Vec<PathBuf>,
    ckpt_len: usize,
}

fn sizes(scale: f64) -> (usize, usize, usize, usize) {
    let n_small = ((60_000.0 * scale) as usize).max(200);
    let n_shards = ((200.0 * scale) as usize).max(3);
    let n_dups = ((10.0 * scale) as usize).clamp(1, n_shards);
    let ckpt = ((200.0 * scale).max(8.0) as usize) << 20;
    (n_small, n_shards, n_dups, ckpt)
}

fn generate(root: &Path, scale: f64) -> Tree {
    let (n_small, n_shards, n_dups, ckpt_len) = sizes(scale);
    let mut rng = 0x1234_5678_u64;
    for d in 0..200 {
        std::fs::create_dir_all(root.join(format!("small/d{d:03}"))).unwrap();
    }
    for d in ["shards", "checkpoints"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut small = Vec::with_capacity(n_small);
    for i in 0..n_small {
        let f = Small {
            path: root.join(format!("small/d{:03}/f{i:06}.txt", i % 200)),
            seed: i as u64,
            len: 1024 + (xorshift(&mut rng) % (31 * 1024)) as usize,
        };
        f.write();
        small.push(f);
    }
    for i in 0..n_shards {
        let len = (1 << 20) + (xorshift(&mut rng) % (7 << 20)) as usize;
        let p = root.join(format!("shards/shard-{i:04}.tar"));
        std::fs::write(&p, noise(1_000_000 + i as u64, len)).unwrap();
        if i < n_dups {
            // The same bytes under another name (a re-uploaded dataset, a copied folder).
            std::fs::copy(&p, root.join(format!("shards/copy-of-shard-{i:04}.tar"))).unwrap();
        }
    }
    let checkpoints: Vec<PathBuf> = (0..3)
        .map(|i| root.join(format!("checkpoints/step-{i}.pt")))
        .collect();
    for (i, p) in checkpoints.iter().enumerate() {
        std::fs::write(p, noise(2_000_000 + i as u64, ckpt_len)).unwrap();
    }
    Tree {
        small,
        checkpoints,
        ckpt_len,
    }
}

/// The 1% change. Returns what to undo: the files it added.
fn change(tree: &Tree, root: &Path) -> Vec<PathBuf> {
    let n = tree.small.len();
    for (k, f) in tree.small.iter().step_by(100).enumerate() {
        std::fs::write(&f.path, text(5_000_000 + k as u64, f.len + 1 + k % 7)).unwrap();
    }
    for f in tree.small.iter().skip(7).step_by(500) {
        std::fs::remove_file(&f.path).unwrap();
    }
    let mut added = Vec::new();
    for k in 0..(n / 500).max(1) {
        let p = root.join(format!("small/d{:03}/new-{k:05}.txt", (k * 7) % 200));
        std::fs::write(
            &p,
            text(7_000_000 + k as u64, 1024 + (k * 997) % (31 * 1024)),
        )
        .unwrap();
        added.push(p);
    }
    let ck = &tree.checkpoints[0];
    let mut data = std::fs::read(ck).unwrap();
    let mid = data.len() / 2;
    data.splice(mid..mid, noise(3_000_000, 4096));
    std::fs::write(ck, data).unwrap();
    added
}

/// Puts the tree back as `generate` made it.
fn undo(tree: &Tree, added: &[PathBuf]) {
    for f in tree.small.iter().step_by(100) {
        f.write();
    }
    for f in tree.small.iter().skip(7).step_by(500) {
        f.write();
    }
    for p in added {
        std::fs::remove_file(p).unwrap();
    }
    std::fs::write(&tree.checkpoints[0], noise(2_000_000, tree.ckpt_len)).unwrap();
}

/// Regular files and their bytes under `root`.
fn count(root: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let m = e.path().symlink_metadata().unwrap();
        if m.is_dir() {
            let (f, b) = count(&e.path());
            files += f;
            bytes += b;
        } else if m.is_file() {
            files += 1;
            bytes += m.len();
        }
    }
    (files, bytes)
}

fn du(p: &Path) -> f64 {
    let out = run(Command::new("du").arg("-sb").arg(p));
    out.split_whitespace().next().unwrap().parse().unwrap()
}

fn sync() {
    nix::unistd::sync();
}

/// How long a `sync` takes: the flush of what the last tool left dirty.
fn sync_time() -> f64 {
    let t0 = Instant::now();
    sync();
    t0.elapsed().as_secs_f64()
}

/// One timed process: wall seconds, then the flush after it, and its peak RSS.
struct Ran {
    secs: f64,
    sync_secs: f64,
    rss_mib: f64,
    out: String,
}

/// Runs `program args` under GNU time after a `sync`, timing it by wall clock.
fn measure(program: &Path, args: &[OsString], envs: &[(&str, OsString)], scratch: &Path) -> Ran {
    let rss_file = scratch.join("rss");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(program)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)));
    sync();
    let t0 = Instant::now();
    let out = run(&mut cmd);
    let secs = t0.elapsed().as_secs_f64();
    let sync_secs = sync_time();
    let rss = std::fs::read_to_string(&rss_file).unwrap();
    let kib: f64 = rss.lines().last().unwrap().trim().parse().unwrap();
    Ran {
        secs,
        sync_secs,
        rss_mib: kib / 1024.0,
        out,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Tool {
    Labpool,
    Rsync,
    LinkDest,
    Restic,
}

const TOOLS: [Tool; 4] = [Tool::Labpool, Tool::Rsync, Tool::LinkDest, Tool::Restic];

/// Where one run keeps each tool's repository, and how to call the tools.
struct Setup {
    exe: PathBuf,
    src: PathBuf,
    work: PathBuf,
}

impl Setup {
    fn repo(&self, t: Tool) -> PathBuf {
        self.work.join(match t {
            Tool::Labpool => "labpool",
            Tool::Rsync => "rsync",
            Tool::LinkDest => "link-dest",
            Tool::Restic => "restic",
        })
    }

    fn restic_env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("RESTIC_PASSWORD", "bench".into()),
            ("XDG_CACHE_HOME", self.work.join("restic-cache").into()),
            ("TMPDIR", self.work.join("tmp").into()),
        ]
    }

    fn restic(&self, args: &[&str], extra: &[OsString]) -> Ran {
        let mut a: Vec<OsString> = vec!["--repo".into(), self.repo(Tool::Restic).into()];
        a.extend(args.iter().map(OsString::from));
        a.extend(extra.iter().cloned());
        measure(Path::new("restic"), &a, &self.restic_env(), &self.work)
    }

    fn labpool(&self, op: &str, args: &[OsString]) -> Ran {
        let mut a = vec![OsString::from(self.repo(Tool::Labpool))];
        a.extend(args.iter().cloned());
        measure(&self.exe, &a, &[(CHILD, op.into())], &self.work)
    }

    fn rsync(&self, args: &[OsString]) -> Ran {
        measure(Path::new("rsync"), args, &[], &self.work)
    }

    fn init(&self) {
        std::fs::create_dir_all(self.work.join("tmp")).unwrap();
        self.labpool("init", &[]);
        self.restic(&["init", "-q"], &[]);
        std::fs::create_dir_all(self.repo(Tool::Rsync)).unwrap();
        std::fs::create_dir_all(self.repo(Tool::LinkDest)).unwrap();
    }

    /// Backup number `day` (1, 2, 3).
    fn backup(&self, t: Tool, day: u32) -> Ran {
        let src_slash = OsString::from(format!("{}/", self.src.display()));
        let dest = |t| OsString::from(self.repo(t).join(format!("day-{day}")));
        match t {
            Tool::Labpool => self.labpool("backup", &[self.src.clone().into()]),
            Tool::Restic => self.restic(&["backup", "-q"], &[self.src.clone().into()]),
            Tool::Rsync => self.rsync(&["-a".into(), "--delete".into(), src_slash, dest(t)]),
            Tool::LinkDest => {
                let mut a: Vec<OsString> = vec!["-a".into(), "--delete".into()];
                if day > 1 {
                    let prev = self.repo(t).join(format!("day-{}", day - 1));
                    a.push(format!("--link-dest={}", prev.display()).into());
                }
                a.extend([src_slash, dest(t)]);
                self.rsync(&a)
            }
        }
    }

    /// Restores `file` (absolute, in the source) from the latest backup into the fresh
    /// directory `target`; returns where it landed.
    fn restore_one(&self, t: Tool, file: &Path, target: &Path) -> (Ran, PathBuf) {
        std::fs::create_dir_all(target).unwrap();
        let rel = file.strip_prefix(&self.src).unwrap();
        let name = target.join(file.file_name().unwrap());
        match t {
            Tool::Labpool => (
                self.labpool("restore-one", &[file.into(), target.into()]),
                name,
            ),
            Tool::Restic => (
                self.restic(
                    &["restore", "latest", "-q", "--target"],
                    &[target.into(), "--include".into(), file.into()],
                ),
                target.join(file.strip_prefix("/").unwrap()),
            ),
            Tool::Rsync | Tool::LinkDest => (
                self.rsync(&[
                    "-a".into(),
                    self.repo(t).join("day-3").join(rel).into(),
                    format!("{}/", target.display()).into(),
                ]),
                name,
            ),
        }
    }

    /// Restores the whole latest backup into the fresh directory `target`; returns where the
    /// tree's root landed.
    fn restore_all(&self, t: Tool, target: &Path) -> (Ran, PathBuf) {
        std::fs::create_dir_all(target).unwrap();
        let src_name = self.src.file_name().unwrap();
        match t {
            Tool::Labpool => (
                self.labpool("restore-all", &[target.into()]),
                target.join(src_name),
            ),
            Tool::Restic => (
                self.restic(&["restore", "latest", "-q", "--target"], &[target.into()]),
                target.join(self.src.strip_prefix("/").unwrap()),
            ),
            Tool::Rsync | Tool::LinkDest => (
                self.rsync(&[
                    "-a".into(),
                    format!("{}/", self.repo(t).join("day-3").display()).into(),
                    target.join(src_name).into(),
                ]),
                target.join(src_name),
            ),
        }
    }

    fn verify(&self, t: Tool) -> Option<Ran> {
        match t {
            Tool::Labpool => Some(self.labpool("check", &[])),
            Tool::Restic => Some(self.restic(&["check", "-q", "--read-data"], &[])),
            Tool::Rsync | Tool::LinkDest => None,
        }
    }
}

/// labpool's side of a measurement, in its own process: `BENCH_SNAPSHOT_CHILD=op exe REPO ...`.
fn child(op: &str) {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let repo_path = &args[0];
    let t0 = Instant::now();
    let progress = Progress::default();
    if op == "init" {
        Repository::init(repo_path).unwrap();
        return;
    }
    let repo = Repository::open(repo_path).unwrap();
    let restore = |node: &labpool_snapshots::tree::Node, target: &Path| {
        let fd = open_dir_nofollow(target).unwrap();
        let opts = RestoreOptions {
            set_owner: true,
            ..Default::default()
        };
        let r = restore_node(&repo, node, &fd, target, &opts, &progress).unwrap();
        assert!(r.failed.is_empty(), "restore failed: {:?}", r.failed);
        println!(
            "restored {} files, {} bytes in {:.3} s in process",
            r.files,
            r.bytes,
            t0.elapsed().as_secs_f64()
        );
    };
    match op {
        "backup" => {
            let opts = BackupOptions {
                source: "datasets".into(),
                path: args[1].clone(),
                excludes: vec![],
                one_file_system: true,
                host: "bench".into(),
                time: chrono::Utc::now(),
            };
            let r = labpool_snapshots::create(&repo, &opts, &progress).unwrap();
            assert!(r.warnings.is_empty(), "backup warnings: {:?}", r.warnings);
            println!(
                "snapshot {}: {} files, {} bytes, added {} bytes",
                r.snapshot.id, r.snapshot.files, r.snapshot.bytes, r.snapshot.added_bytes
            );
        }
        "restore-one" => {
            let snap = repo.select("latest").unwrap();
            let node = labpool_snapshots::browse::lookup(&repo, &snap, &args[1], None)
                .unwrap()
                .expect("the file is in the latest snapshot");
            restore(&node, &args[2]);
        }
        "restore-all" => {
            let snap = repo.select("latest").unwrap();
            restore(&snap.root, &args[1]);
        }
        "check" => {
            let r = labpool_snapshots::check::check(&repo, true, &progress).unwrap();
            assert!(r.ok(), "check found problems: {:?}", r.errors);
            println!(
                "checked {} packs, {} blobs, {} trees",
                r.packs, r.blobs_read, r.trees
            );
        }
        other => panic!("unknown child operation {other}"),
    }
}

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
