//! `cargo bench --bench delta`: bytes and time to bring a changed file to a node that has its
//! old version, labpool's delta (rsync signature up, `fast_rsync` delta down, BLAKE3 check)
//! against `rsync --no-whole-file` on the same files, in one run.
//!
//! Cases on a 64 MiB random file (a dataset shard, a checkpoint): 64 KiB rewritten in place,
//! 64 KiB inserted (everything after shifts), 1 MiB appended, and 1% changed as 160 scattered
//! 4 KiB edits. rsync runs locally with `--no-whole-file --ignore-times --stats` (its delta
//! algorithm, which it skips between local paths by default, on every run even when size and
//! mtime match); its "Total bytes sent/received" are the figures.
//! Knobs: `BENCH_RUNS` (default 3), `BENCH_DIR` (default /var/tmp).

#[path = "common.rs"]
mod common;

use common::{bench_base, env_num, median, run, scratch_dir, xorshift};
use labpool_cache::delta::{DeltaOptions, Peer, delta, fetch};
use std::process::Command;
use std::time::Instant;

const SIZE: usize = 64 << 20;

fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&xorshift(&mut x).to_le_bytes());
    }
    out.truncate(len);
    out
}

struct Local(Vec<u8>);

impl Peer for Local {
    fn delta(&self, signature: &[u8]) -> std::io::Result<Vec<u8>> {
        delta(signature, &self.0)
    }
    fn whole(&self) -> std::io::Result<Vec<u8>> {
        Ok(self.0.clone())
    }
}

/// rsync's "Total bytes sent" and "Total bytes received" from `--stats`.
fn rsync_bytes(stats: &str) -> (u64, u64) {
    let field = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().replace(',', ""))
            .and_then(|v| v.split_whitespace().next().map(str::to_string))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in rsync's stats:\n{stats}"))
    };
    (field("Total bytes sent:"), field("Total bytes received:"))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    common::require_tools("cargo bench --bench delta", &[("rsync", "rsync")]);
    let runs: usize = env_num("BENCH_RUNS", 3);
    let work = scratch_dir(&bench_base(), "delta");
    let w = work.path();
    let old = random(1, SIZE);
    let mut cases: Vec<(&str, Vec<u8>, usize)> = Vec::new();
    let mut edited = old.clone();
    // Not on a block boundary, as edits never are.
    let at = (30 << 20) + 1000;
    edited[at..at + 65_536].copy_from_slice(&random(2, 65_536));
    cases.push(("64 KiB rewritten in place", edited, 65_536));
    let mut inserted = old[..(40 << 20) + 777].to_vec();
    inserted.extend(random(3, 65_536));
    inserted.extend(&old[(40 << 20) + 777..]);
    cases.push(("64 KiB inserted", inserted, 65_536));
    let mut appended = old.clone();
    appended.extend(random(4, 1 << 20));
    cases.push(("1 MiB appended", appended, 1 << 20));
    let mut scattered = old.clone();
    let mut x = 99u64;
    for i in 0..160 {
        let at = (xorshift(&mut x) as usize) % (SIZE - 4096);
        scattered[at..at + 4096].copy_from_slice(&random(10 + i, 4096));
    }
    cases.push(("1% as 160 scattered 4 KiB edits", scattered, 160 * 4096));

    println!(
        "| case | labpool down | rsync sent | labpool up | rsync received | labpool down / changed | rsync sent / changed | both ways, rsync / labpool | labpool time | rsync time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (name, new, changed) in cases {
        let expected = blake3::hash(&new).to_hex().to_string();
        let peer = Local(new.clone());
        let (mut ours_t, mut theirs_t) = (Vec::new(), Vec::new());
        let (mut ours_b, mut theirs_b) = ((0, 0), (0, 0));
        std::fs::write(w.join("new"), &new).unwrap();
        for _ in 0..runs {
            let t = Instant::now();
            let (got, tr) = fetch(Some(&old), &expected, &peer, DeltaOptions::default()).unwrap();
            ours_t.push(t.elapsed().as_secs_f64());
            assert!(!tr.whole && got.len() == new.len());
            ours_b = (tr.bytes_down, tr.bytes_up);

            std::fs::write(w.join("dest"), &old).unwrap();
            let t = Instant::now();
            let stats = run(Command::new("rsync")
                .args(["--no-whole-file", "--ignore-times", "--stats"])
                .arg(w.join("new"))
                .arg(w.join("dest")));
            theirs_t.push(t.elapsed().as_secs_f64());
            theirs_b = rsync_bytes(&stats);
            assert!(
                std::fs::read(w.join("dest")).unwrap() == new,
                "rsync did not update the file"
            );
        }
        println!(
            "| {name} | {} | {} | {} | {} | {:.3} | {:.3} | {:.2}x | {:.2} s | {:.2} s |",
            ours_b.0,
            theirs_b.0,
            ours_b.1,
            theirs_b.1,
            ours_b.0 as f64 / changed as f64,
            theirs_b.0 as f64 / changed as f64,
            (theirs_b.0 + theirs_b.1) as f64 / (ours_b.0 + ours_b.1) as f64,
            median(ours_t),
            median(theirs_t)
        );
    }
}
