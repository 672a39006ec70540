//! This month's credit ledger, as the engine keeps it in memory: the entries since the month
//! began, and the month's bounds. The database holds every entry; this part holds what the
//! balances of the month are computed from, and is the one place that decides which entries
//! count (those inside the month).

use labpool_scheduler::Timestamp;
use labpool_scheduler::credits::{Entry, MonthSummary, month_summary};
use labpool_scheduler::policy::CreditPolicy;

/// The month's entries, oldest first, and its bounds (ms).
#[derive(Debug, Default)]
pub struct MonthLedger {
    entries: Vec<Entry>,
    start: i64,
    end: i64,
}

impl MonthLedger {
    /// Starts the month [`start`, `end`) with the entries the database holds from `start` on
    /// (those at or after `end` are dropped, as [`MonthLedger::record`] drops them).
    pub fn begin(&mut self, start: i64, end: i64, entries: Vec<Entry>) {
        self.start = start;
        self.end = end;
        self.entries.clear();
        self.record(entries);
    }

    /// Whether `now` is past the month: a new one must begin.
    pub fn is_over(&self, now: i64) -> bool {
        now >= self.end
    }

    /// The first moment of the month, ms.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// Keeps `entries` that fall inside the month (a charge dated before it, for a job that
    /// ran across the turn of the month, belongs to the month before).
    pub fn record(&mut self, entries: impl IntoIterator<Item = Entry>) {
        let (start, end) = (self.start, self.end);
        self.entries.extend(
            entries
                .into_iter()
                .filter(|e| e.time.0 >= start && e.time.0 < end),
        );
    }

    /// `user`'s month so far.
    pub fn summary(&self, policy: &CreditPolicy, user: &str) -> MonthSummary {
        month_summary(
            policy,
            &self.entries,
            user,
            Timestamp(self.start),
            Timestamp(self.end),
        )
    }

    /// `user`'s entries, oldest first.
    pub fn entries_of<'a>(&'a self, user: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| e.user == user)
    }

    /// Everyone with an entry this month.
    pub fn users(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.user.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use labpool_scheduler::credits::EntryKind;
    use labpool_scheduler::policy::CreditPolicy;

    fn entry(user: &str, at: i64, amount: f64) -> Entry {
        Entry {
            time: Timestamp(at),
            user: user.into(),
            kind: EntryKind::Grant,
            amount,
            job: None,
            note: None,
        }
    }

    #[test]
    fn only_the_months_entries_count() {
        let mut l = MonthLedger::default();
        l.begin(
            1_000,
            2_000,
            vec![entry("ann", 1_500, 5.0), entry("ann", 2_500, 7.0)],
        );
        l.record([entry("ann", 999, 11.0), entry("bob", 1_999, 3.0)]);
        assert_eq!(
            l.entries_of("ann").count(),
            1,
            "the later one is next month's"
        );
        assert_eq!(l.users().collect::<Vec<_>>(), ["ann", "bob"]);
        let policy = CreditPolicy::default();
        assert_eq!(l.summary(&policy, "ann").granted, 5.0);
        assert!(!l.is_over(1_999));
        assert!(l.is_over(2_000));
    }
}
