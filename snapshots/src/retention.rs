//! Retention: which snapshots a `--keep-*` policy keeps. A pure function of the snapshot list,
//! so a simulated clock tests it exactly.
//!
//! The rule (restic's): going from newest to oldest within one source, each `keep_daily` slot
//! keeps the newest snapshot of a day that has not been kept for yet, until the count is used
//! up; weekly (ISO weeks) and monthly likewise. A snapshot kept by any rule stays. Days follow
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
            out.push(Verdict {
                snapshot: s.clone(),
                keep: !reasons.is_empty(),
                reasons,
            });
        }
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
