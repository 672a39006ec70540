//! Cron schedules for the controller's timed services (snapshots, quota scans, the scratch
//! purge, the datasets audit): standard 5-field crontab syntax through croner, with an optional leading seconds
//! field, evaluated in the machine's local time.

use chrono::{DateTime, Local, Utc};
use croner::Cron;
use std::str::FromStr;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    text: String,
}

impl Schedule {
    /// Parses `0 3 * * *` (minute hour day month weekday; 0 or 7 is Sunday), or the same with
    /// a leading seconds field.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let cron = Cron::from_str(text).map_err(|e| {
            format!("schedule {text:?} is not a cron expression ({e}); write e.g. \"0 3 * * *\" for 03:00 every night")
        })?;
        Ok(Schedule {
            cron,
            text: text.to_string(),
        })
    }

    /// The newest fire time in `(after, now]`: a run that is due (or was missed while the
    /// controller was down).
    pub fn due(&self, after: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let now_local = now.with_timezone(&Local);
        let t = self.cron.find_previous_occurrence(&now_local, true).ok()?;
        let t = t.with_timezone(&Utc);
        (t > after).then_some(t)
    }

    /// The first fire time after `now`.
    pub fn next(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let now_local = now.with_timezone(&Local);
        self.cron
            .find_next_occurrence(&now_local, false)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// The schedule in words ("At 03:00").
    pub fn describe(&self) -> String {
        self.cron.describe()
    }

    /// As written.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn nightly_is_due_once_after_its_time_and_a_missed_run_is_caught_up() {
        // Local time is UTC in the tests (TZ unset); a zone offset would only shift the hours.
        if Local::now().offset().local_minus_utc() != 0 {
            eprintln!("SKIPPED: needs TZ=UTC");
            return;
        }
        let s = Schedule::parse("0 3 * * *").unwrap();
        assert_eq!(
            s.due(t("2026-12-01T03:00:00Z"), t("2026-12-02T02:59:00Z")),
            None
        );
        assert_eq!(
            s.due(t("2026-12-01T03:00:00Z"), t("2026-12-02T03:00:30Z")),
            Some(t("2026-12-02T03:00:00Z"))
        );
        // Down from Dec 1 noon to Dec 3 10:00: one catch-up run (the newest missed time).
        assert_eq!(
            s.due(t("2026-12-01T12:00:00Z"), t("2026-12-03T10:00:00Z")),
            Some(t("2026-12-03T03:00:00Z"))
        );
        assert_eq!(
            s.next(t("2026-12-03T10:00:00Z")),
            Some(t("2026-12-04T03:00:00Z"))
        );
        // Crontab weekdays: 1 is Monday. 2026-12-07 is a Monday.
        let monday = Schedule::parse("30 4 * * 1").unwrap();
        assert_eq!(
            monday.next(t("2026-12-03T00:00:00Z")),
            Some(t("2026-12-07T04:30:00Z"))
        );
        // Seconds, for tests and fast schedules.
        let every2 = Schedule::parse("*/2 * * * * *").unwrap();
        assert_eq!(
            every2.next(t("2026-12-03T00:00:00Z")),
            Some(t("2026-12-03T00:00:02Z"))
        );
    }

    #[test]
    fn a_bad_expression_says_how_to_write_one() {
        let e = Schedule::parse("every night").unwrap_err();
        assert!(e.contains("0 3 * * *"), "{e}");
        assert!(Schedule::parse("0 25 * * *").is_err());
    }
}
