//! The wall clock, read in one place. The scheduler and lifecycle cores never read it; the
//! daemons pass `now` in. The engine and the timer service take a [`Clock`], so tests can run
//! them on a clock of their own.

use labpool_scheduler::Timestamp;
use std::sync::Arc;

/// A source of wall-clock time.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Now, as the scheduler takes it.
    fn now(&self) -> Timestamp {
        Timestamp(self.now_ms())
    }

    /// Now, for cron schedules.
    fn now_utc(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp_millis(self.now_ms()).unwrap_or_default()
    }
}

/// The machine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        now_ms()
    }
}

/// The machine's clock, shared.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// Milliseconds since the Unix epoch, from the machine's clock (for code that has no
/// [`Clock`] to ask: the CLI, the shim).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Now, as the scheduler takes it.
pub fn now() -> Timestamp {
    Timestamp(now_ms())
}

/// Milliseconds since the epoch as an RFC 3339 local time, to the millisecond.
pub fn rfc3339(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t
            .with_timezone(&chrono::Local)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        None => ms.to_string(),
    }
}

/// Milliseconds since the epoch as labpool writes a moment for people, everywhere outside the
/// Slurm commands (`show`, `why`, `nodes`, `snapshot list`, the web): local time to the
/// second, `2026-12-02 15:04:05`.
pub fn when(ms: i64) -> String {
    local_format(ms, "%Y-%m-%d %H:%M:%S")
}

/// Milliseconds since the epoch as Slurm's commands write a local time: `2026-12-02T15:04:05`
/// (squeue, scontrol, sacct, sbatch --test-only); labpool's own commands use [`when`].
pub fn short(ms: i64) -> String {
    local_format(ms, "%Y-%m-%dT%H:%M:%S")
}

/// Milliseconds since the epoch in local time, as `format` writes it.
fn local_format(ms: i64, format: &str) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.with_timezone(&chrono::Local).format(format).to_string(),
        None => ms.to_string(),
    }
}

/// An RFC 3339 time as milliseconds since the epoch.
pub fn parse_ms(rfc3339: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// The local calendar month holding `ms`: its start and end (ms), its name (`2026-12`) and the
/// date it ends (`2027-01-01`), when credits and emergency tokens reset.
pub fn month_of(ms: i64) -> (i64, i64, String, String) {
    use chrono::{Datelike, Local, NaiveDate, TimeZone};
    let t = chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .with_timezone(&Local);
    let first =
        NaiveDate::from_ymd_opt(t.year(), t.month(), 1).expect("the first of a month exists");
    let next = if t.month() == 12 {
        NaiveDate::from_ymd_opt(t.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(t.year(), t.month() + 1, 1)
    }
    .expect("the first of a month exists");
    let at = |d: NaiveDate| {
        Local
            .from_local_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight exists"))
            .earliest()
            .map_or(0, |t| t.timestamp_millis())
    };
    (
        at(first),
        at(next),
        first.format("%Y-%m").to_string(),
        next.format("%Y-%m-%d").to_string(),
    )
}

/// A month that is not `YYYY-MM`.
#[derive(Debug, thiserror::Error)]
#[error("--month {0:?}: give YYYY-MM, e.g. 2026-11")]
pub struct BadMonth(pub String);

/// The first moment of day `d` in local time, ms.
pub fn midnight(d: chrono::NaiveDate) -> i64 {
    use chrono::TimeZone;
    chrono::Local
        .from_local_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight exists"))
        .earliest()
        .map_or(0, |t| t.timestamp_millis())
}

fn first_of(month: &str) -> Result<chrono::NaiveDate, BadMonth> {
    chrono::NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d")
        .map_err(|_| BadMonth(month.to_string()))
}

/// `YYYY-MM` as [first midnight, next month's first midnight) in local time.
pub fn month_range(month: &str) -> Result<(i64, i64), BadMonth> {
    use chrono::Datelike;
    let first = first_of(month)?;
    let next = if first.month() == 12 {
        chrono::NaiveDate::from_ymd_opt(first.year() + 1, 1, 1)
    } else {
        chrono::NaiveDate::from_ymd_opt(first.year(), first.month() + 1, 1)
    }
    .expect("the first of a month exists");
    Ok((midnight(first), midnight(next)))
}

/// The month before `month`, as `YYYY-MM`.
pub fn month_before(month: &str) -> Result<String, BadMonth> {
    let prev = first_of(month)?.pred_opt().expect("a day before exists");
    Ok(prev.format("%Y-%m").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months() {
        let dec = chrono::NaiveDate::from_ymd_opt(2026, 12, 2)
            .unwrap()
            .and_hms_opt(12, 0, 0)
            .unwrap();
        let ms = chrono::TimeZone::from_local_datetime(&chrono::Local, &dec)
            .earliest()
            .unwrap()
            .timestamp_millis();
        let (start, end, name, resets) = month_of(ms);
        assert!(start <= ms && ms < end);
        assert_eq!((name.as_str(), resets.as_str()), ("2026-12", "2027-01-01"));
    }
}
