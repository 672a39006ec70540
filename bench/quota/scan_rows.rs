//! The scan rows: labpool's scan against `du` and `find` on the scan tree, each checked
//! against the tree, cold and warm.

use crate::child::CHILD;
use crate::common::{median, run};
use crate::table::{cell, cond_name, ratio, thousands};
use crate::timing::{Ran, measure};
use crate::tree::{Made, USERS};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// A scan tool measured.
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

/// The scan rows: each tool cold and warm, `runs` times; returns the table.
pub fn scan_rows(
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
