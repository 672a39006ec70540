//! The generated trees: users' run directories of small files, owned by 40 uids, with the file
//! times a purge twin needs; and the scan tree, made once and kept between runs.

use crate::common::{rm, xorshift};
use crate::timing::sync;
use std::fs::FileTimes;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// A day in seconds.
pub const DAY: u64 = 86_400;
/// The users (and uids) the files belong to.
pub const USERS: usize = 40;

/// How a tree's file times are set.
#[derive(Clone, Copy, PartialEq)]
pub enum Ages {
    /// All fresh (the scan tree).
    Fresh,
    /// `find`'s twin: every other file (the ones to go) 40 days back.
    OldBack,
    /// labpool's twin: every other file (the ones to keep) 39 days ahead.
    KeepAhead,
}

/// What a generated tree holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Made {
    /// Every name, the root included (what `find` lists).
    pub names: u64,
    /// Regular file names.
    pub files: u64,
    /// Files to be purged (every other one).
    pub old: u64,
    /// Second names of hard-linked files (counted once by `du` and labpool).
    pub extra_links: u64,
    /// Apparent bytes of the regular files.
    pub file_bytes: u64,
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
pub fn generate(root: &Path, n_dirs: usize, links: bool, ages: Ages) -> Made {
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

/// The scan tree, made once and kept: `(root, what it holds, seconds to make it or None)`.
pub fn scan_tree(base: &Path, n_dirs: usize) -> (PathBuf, Made, Option<f64>) {
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
