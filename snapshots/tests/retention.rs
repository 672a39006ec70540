//! Retention: forgetting snapshots by policy, and prune freeing what no snapshot keeps.

mod common;
#[allow(dead_code)]
mod support;

use common::*;
use labpool_snapshots::check::check;
use labpool_snapshots::prune::{forget, prune};
use labpool_snapshots::{Policy, Progress};
use std::fs;
use support::*;

#[test]
fn forty_nightly_snapshots_keep_exactly_the_policy_set_and_prune_frees_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("d");
    fs::create_dir(&src).unwrap();
    let repo = repo(tmp.path());
    let start: chrono::DateTime<chrono::Utc> = "2026-10-01T03:00:00Z".parse().unwrap();
    let mut ids = Vec::new();
    for day in 0..40 {
        fs::write(src.join(format!("day-{day}.bin")), noise(100_000, day)).unwrap();
        if day > 0 {
            fs::remove_file(src.join(format!("day-{}.bin", day - 1))).unwrap();
        }
        let t = start + chrono::Duration::days(day as i64);
        ids.push(backup(&repo, "d", &src, &t.to_rfc3339()).id);
    }
    let policy = Policy {
        keep_daily: 7,
        keep_weekly: 4,
        ..Default::default()
    };
    let utc = chrono::FixedOffset::east_opt(0).unwrap();
    let dry = forget(&repo, &policy, utc, true).unwrap();
    assert_eq!(
        repo.snapshots().unwrap().len(),
        40,
        "a dry run forgets nothing"
    );
    let verdicts = forget(&repo, &policy, utc, false).unwrap();
    assert_eq!(dry.len(), verdicts.len());
    // Days 33–39 (Nov 3–9) daily; weekly: the newest of the 4 newest ISO weeks. Nov 9 2026 is a
    // Monday, so its week's newest is day 39; the weeks before end on Sundays Nov 8, Nov 1,
    // Oct 25: days 38, 31, 24.
    let mut expect: Vec<usize> = (33..40).collect();
    expect.extend([31, 24]);
    expect.sort();
    let kept: Vec<String> = repo
        .snapshots()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    let expect_ids: Vec<String> = expect.iter().map(|&d| ids[d].clone()).collect();
    assert_eq!(kept, expect_ids);
    let why38 = verdicts.iter().find(|v| v.snapshot.id == ids[38]).unwrap();
    assert_eq!(why38.reasons, vec!["daily", "weekly"]);

    let before = dir_size(&repo.root().join("packs"));
    let p = prune(&repo, false, &Progress::default()).unwrap();
    let after = dir_size(&repo.root().join("packs"));
    assert!(p.packs_deleted + p.packs_rewritten > 0, "{p:?}");
    assert!(
        after < before / 2,
        "prune freed too little: {before} -> {after}"
    );
    assert!(check(&repo, true, &Progress::default()).unwrap().ok());
    let target = tmp.path().join("t");
    restore_all(&repo, &repo.select(&ids[24]).unwrap(), &target);
    assert_eq!(
        fs::read(target.join("d/day-24.bin")).unwrap(),
        noise(100_000, 24)
    );
    // Nothing is left to prune.
    let again = prune(&repo, false, &Progress::default()).unwrap();
    assert_eq!(again.packs_deleted + again.packs_rewritten, 0, "{again:?}");
}
