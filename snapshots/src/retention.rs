//! Retention: which snapshots a `--keep-*` policy keeps. A pure function of the snapshot list,
//! so a simulated clock tests it exactly.
//!
//! The rule (restic's, since 0.14): going from newest to oldest within one source, each
//! `keep_daily` slot keeps the newest snapshot of a day that has not been kept for yet, until
//! the count is used up; weekly (ISO weeks) and monthly likewise. A rule whose count is not
//! used up also keeps the oldest snapshot. A snapshot kept by any rule stays. Days follow
//! the given time zone offset, so "daily" means the lab's days.

use crate::snapshot::Snapshot;
use chrono::{Datelike, FixedOffset};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many snapshots to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The newest N, whatever their dates.
    pub keep_last: u32,
    /// The newest in each of the last N days that have snapshots.
    pub keep_daily: u32,
    /// The newest in each of the last N ISO weeks that have snapshots.
    pub keep_weekly: u32,
    /// The newest in each of the last N months that have snapshots.
    pub keep_monthly: u32,
}

impl Policy {
    /// Whether the policy keeps nothing at all (refused: it would forget everything).
    pub fn is_empty(&self) -> bool {
        *self == Policy::default()
    }
}

/// The verdict on one snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Whether it stays.
    pub keep: bool,
    /// Which rules keep it (`last`, `daily`, `weekly`, `monthly`).
    pub reasons: Vec<&'static str>,
}

/// Applies `policy` to each source's snapshots separately; the result is newest first per
/// source, sources in name order.
pub fn plan(snapshots: &[Snapshot], policy: &Policy, tz: FixedOffset) -> Vec<Verdict> {
    let mut groups: BTreeMap<(String, String), Vec<&Snapshot>> = BTreeMap::new();
    for s in snapshots {
        groups
            .entry((s.source.clone(), s.path.display().to_string()))
            .or_default()
            .push(s);
    }
    let mut out = Vec::new();
    for (_, mut group) in groups {
        group.sort_by(|a, b| b.time.cmp(&a.time).then(b.id.cmp(&a.id)));
        let rules = [
            ("last", policy.keep_last),
            ("daily", policy.keep_daily),
            ("weekly", policy.keep_weekly),
            ("monthly", policy.keep_monthly),
        ];
        let mut left: Vec<u32> = rules.iter().map(|r| r.1).collect();
        let mut last_bucket: Vec<Option<(i32, u32)>> = vec![None; rules.len()];
        let mut verdicts = Vec::with_capacity(group.len());
        for s in group {
            let mut reasons = Vec::new();
            for (k, (name, _)) in rules.iter().enumerate() {
                if left[k] == 0 {
                    continue;
                }
                let b = bucket(name, s, tz);
                // `last` keeps every snapshot until its count is used up.
                if *name == "last" || last_bucket[k] != Some(b) {
                    last_bucket[k] = Some(b);
                    left[k] -= 1;
                    reasons.push(*name);
                }
            }
            verdicts.push(Verdict {
                snapshot: s.clone(),
                keep: !reasons.is_empty(),
                reasons,
            });
        }
        // A rule whose count was not used up keeps the oldest snapshot too: with 3 weeks of
        // history and --keep-weekly 4, the oldest week's first snapshot is the 4th.
        if let Some(oldest) = verdicts.last_mut() {
            for (k, (name, _)) in rules.iter().enumerate() {
                if left[k] > 0 && !oldest.reasons.contains(name) {
                    oldest.reasons.push(name);
                    oldest.keep = true;
                }
            }
        }
        out.extend(verdicts);
    }
    out
}

/// The calendar slot of `s` for rule `rule`: its day, ISO week or month in `tz`.
fn bucket(rule: &str, s: &Snapshot, tz: FixedOffset) -> (i32, u32) {
    let t = s.time.with_timezone(&tz);
    match rule {
        "daily" => (t.year(), t.ordinal()),
        "weekly" => (t.iso_week().year(), t.iso_week().week()),
        "monthly" => (t.year(), t.month()),
        _ => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::BlobId;

    fn snap(id: &str, time: &str) -> Snapshot {
        let root = crate::tree::Node {
            name: b"d".to_vec(),
            kind: crate::tree::NodeKind::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            size: 0,
            dev: 0,
            inode: 0,
            links: 1,
            rdev: 0,
            content: vec![],
            subtree: None,
            target: vec![],
        };
        Snapshot {
            id: id.into(),
            time: time.parse().unwrap(),
            source: "d".into(),
            path: "/d".into(),
            host: "h".into(),
            parent: None,
            tree: BlobId::of(b""),
            root,
            files: 0,
            dirs: 1,
            bytes: 0,
            added_bytes: 0,
            errors: 0,
        }
    }

    #[test]
    fn a_count_not_used_up_keeps_the_oldest_as_well() {
        // Three snapshots in one ISO week (Mon Nov 30 - Wed Dec 2, 2026).
        let all = [
            snap("a", "2026-11-30T03:00:00Z"),
            snap("b", "2026-12-01T03:00:00Z"),
            snap("c", "2026-12-02T03:00:00Z"),
        ];
        let weekly = Policy {
            keep_weekly: 4,
            ..Default::default()
        };
        let v = plan(&all, &weekly, FixedOffset::east_opt(0).unwrap());
        let kept: Vec<(&str, Vec<&str>)> = v
            .iter()
            .filter(|v| v.keep)
            .map(|v| (v.snapshot.id.as_str(), v.reasons.clone()))
            .collect();
        assert_eq!(kept, vec![("c", vec!["weekly"]), ("a", vec!["weekly"])]);
        // keep_last 2 of 3: used up, so the oldest goes.
        let last2 = Policy {
            keep_last: 2,
            ..Default::default()
        };
        let v = plan(&all, &last2, FixedOffset::east_opt(0).unwrap());
        assert_eq!(v.iter().filter(|v| v.keep).count(), 2);
        assert!(!v.iter().find(|v| v.snapshot.id == "a").unwrap().keep);
    }
}
