//! Accounts for a trace that has none: its users split into groups with equal `GrpTRES`
//! shares, to compare strict caps with borrowing and preemption on the same jobs.

use crate::trace::TraceJob;
use labpool_scheduler::policy::{Account, Limits};
use std::collections::{BTreeMap, BTreeSet};

/// The trace's users, in name order, dealt round-robin into `groups` accounts `g0`, `g1`, …,
/// each with an equal share of `total_gpus` (at least its largest job). With `borrow`, each
/// may borrow the whole pool beyond its share (`BorrowLimit`), preemptibly, and keeps `keep`
/// GPUs of its unused share free for its own returning jobs (`LendLimit` = share − keep).
pub fn equal_shares(
    jobs: &[TraceJob],
    groups: usize,
    total_gpus: u32,
    borrow: bool,
    keep: u32,
) -> BTreeMap<String, Account> {
    let groups = groups.max(1);
    let users: BTreeSet<&str> = jobs.iter().map(|j| j.user.as_str()).collect();
    let mut out: BTreeMap<String, Account> = BTreeMap::new();
    for (i, user) in users.into_iter().enumerate() {
        let account = out.entry(format!("g{}", i % groups)).or_default();
        account.members.insert(user.to_string());
    }
    let share = total_gpus / groups as u32;
    for account in out.values_mut() {
        let largest = jobs
            .iter()
            .filter(|j| account.members.contains(&j.user))
            .map(|j| j.gpus)
            .max()
            .unwrap_or(0);
        let share = share.max(largest).max(1);
        account.limits = Limits {
            grp_gpus: Some(share),
            borrow_gpus: borrow.then_some(total_gpus),
            lend_gpus: (borrow && keep > 0).then(|| share.saturating_sub(keep)),
            ..Limits::default()
        };
    }
    out
}

/// The trace with each account away in turn: over consecutive windows of `period_s`, window k
/// drops the jobs of account `g{k % groups}` (users dealt as [`equal_shares`] deals them). A
/// group that is away leaves its share idle under strict caps; this is the case borrowing is for.
pub fn rotate_absences(jobs: &[TraceJob], groups: usize, period_s: f64) -> Vec<TraceJob> {
    let groups = groups.max(1);
    let users: Vec<&str> = jobs
        .iter()
        .map(|j| j.user.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let group_of = |user: &str| users.iter().position(|u| *u == user).unwrap_or(0) % groups;
    jobs.iter()
        .filter(|j| {
            let window = (j.submit_s / period_s.max(1.0)).floor() as usize;
            window % groups != group_of(&j.user)
        })
        .cloned()
        .collect()
}
