//! The credit ledger: append-only entries, from which balances and emergency tokens follow.
//! The controller stores the entries; this module decides what they mean.
//!
//! A month's balance is the monthly grant plus that month's admin grants and rebates, minus
//! that month's charges. Unspent credit does not carry over: every month starts equal, as in
//! the seed lab's scheme.

use crate::policy::CreditPolicy;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// What an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// An admin gave credit.
    Grant,
    /// A job was charged (the amount is positive: it is taken off).
    Charge,
    /// Credit given back for an efficient job.
    Rebate,
    /// An emergency token was spent (amount 0).
    EmergencyToken,
}

impl EntryKind {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Grant => "grant",
            EntryKind::Charge => "charge",
            EntryKind::Rebate => "rebate",
            EntryKind::EmergencyToken => "emergency_token",
        }
    }

    /// Parses the stored word.
    pub fn parse(s: &str) -> Option<EntryKind> {
        [
            EntryKind::Grant,
            EntryKind::Charge,
            EntryKind::Rebate,
            EntryKind::EmergencyToken,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// One ledger entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When.
    pub time: Timestamp,
    /// Whose.
    pub user: String,
    /// What.
    pub kind: EntryKind,
    /// Credits (always positive; the kind says which way).
    pub amount: f64,
    /// The job, for charges, rebates and tokens.
    pub job: Option<u64>,
    /// Who or why.
    pub note: Option<String>,
}

/// A user's month in credits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonthSummary {
    /// The grant every user gets.
    pub monthly_grant: f64,
    /// Admin grants this month.
    pub granted: f64,
    /// Rebates this month.
    pub rebated: f64,
    /// Charges this month.
    pub charged: f64,
    /// What is left (may be negative: overdrawn).
    pub balance: f64,
    /// Emergency tokens left this month.
    pub tokens_left: u32,
}

/// Sums `entries` of `user` from `month_start` (inclusive) to `month_end` (exclusive).
pub fn month_summary(
    policy: &CreditPolicy,
    entries: &[Entry],
    user: &str,
    month_start: Timestamp,
    month_end: Timestamp,
) -> MonthSummary {
    let mut s = MonthSummary {
        monthly_grant: policy.monthly_grant,
        granted: 0.0,
        rebated: 0.0,
        charged: 0.0,
        balance: 0.0,
        tokens_left: policy.emergency_tokens,
    };
    for e in entries
        .iter()
        .filter(|e| e.user == user && e.time >= month_start && e.time < month_end)
    {
        match e.kind {
            EntryKind::Grant => s.granted += e.amount,
            EntryKind::Rebate => s.rebated += e.amount,
            EntryKind::Charge => s.charged += e.amount,
            EntryKind::EmergencyToken => s.tokens_left = s.tokens_left.saturating_sub(1),
        }
    }
    s.balance = s.monthly_grant + s.granted + s.rebated - s.charged;
    s
}

/// Why an emergency token cannot be spent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{user} has used all {allowed} emergency tokens of this month; they come back on {reset}")]
pub struct NoTokens {
    /// The user.
    pub user: String,
    /// Tokens per month.
    pub allowed: u32,
    /// When they come back.
    pub reset: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(user: &str, kind: EntryKind, amount: f64, t: i64) -> Entry {
        Entry {
            time: Timestamp(t),
            user: user.into(),
            kind,
            amount,
            job: None,
            note: None,
        }
    }

    #[test]
    fn a_month_adds_up() {
        let p = CreditPolicy::default();
        let e = vec![
            entry("a", EntryKind::Charge, 300.0, 10),
            entry("a", EntryKind::Grant, 50.0, 20),
            entry("a", EntryKind::EmergencyToken, 0.0, 30),
            entry("a", EntryKind::Charge, 999.0, 5_000), // next month
            entry("b", EntryKind::Charge, 7.0, 10),
        ];
        let s = month_summary(&p, &e, "a", Timestamp(0), Timestamp(1_000));
        assert_eq!(
            (s.charged, s.granted, s.balance, s.tokens_left),
            (300.0, 50.0, 750.0, 1)
        );
        let fresh = month_summary(&p, &e, "c", Timestamp(0), Timestamp(1_000));
        assert_eq!((fresh.balance, fresh.tokens_left), (1000.0, 2));
    }

    proptest! {
        /// The ledger balances: whatever the entries, the balance is the grant plus grants and
        /// rebates minus charges, and tokens never go below zero.
        #[test]
        fn ledger_balances(items in prop::collection::vec((0usize..4, 0.0f64..500.0, 0i64..2_000), 0..60)) {
            let p = CreditPolicy::default();
            let kinds = [EntryKind::Grant, EntryKind::Charge, EntryKind::Rebate, EntryKind::EmergencyToken];
            let entries: Vec<Entry> = items.iter().map(|(k, a, t)| entry("u", kinds[*k], if *k == 3 { 0.0 } else { *a }, *t)).collect();
            let s = month_summary(&p, &entries, "u", Timestamp(0), Timestamp(1_000));
            let in_month = |k: EntryKind| entries.iter().filter(|e| e.kind == k && e.time.0 < 1_000).map(|e| e.amount).sum::<f64>();
            let expected = p.monthly_grant + in_month(EntryKind::Grant) + in_month(EntryKind::Rebate) - in_month(EntryKind::Charge);
            prop_assert!((s.balance - expected).abs() < 1e-6);
            let tokens = entries.iter().filter(|e| e.kind == EntryKind::EmergencyToken && e.time.0 < 1_000).count() as u32;
            prop_assert_eq!(s.tokens_left, p.emergency_tokens.saturating_sub(tokens));
        }
    }
}
