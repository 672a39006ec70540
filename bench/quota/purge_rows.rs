//! The purge rows: labpool's plan and execute against `find -delete`, each on its own freshly
//! generated twin, with what they removed and left checked, and the Robinhood anchor.

use crate::child::CHILD;
use crate::common::{median, rm, run};
use crate::table::{cell, cond_name, ratio, thousands};
use crate::timing::{Ran, drop_caches, measure};
use crate::tree::{Ages, DAY, Made, generate};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The production anchor: Robinhood's policy run, end to end.
const ROBINHOOD: f64 = 4_800.0;

/// Regular files left under `root`.
fn count_files(root: &Path) -> u64 {
    let out = run(Command::new("find")
        .arg(root)
        .args(["-xdev", "-type", "f", "-printf", "."]));
    out.len() as u64
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

/// The purge rows: labpool and `find -delete` on fresh twins, cold and warm, `runs` times;
/// returns the table and the anchor line.
pub fn purge_rows(
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
