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
/// [`Clock`] to ask: the CLI, the shim). Under the test hook
/// [`LABPOOL_TEST_CLOCK_SCALE`](crate::env_vars::LABPOOL_TEST_CLOCK_SCALE) it runs faster.
pub fn now_ms() -> i64 {
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    match scale() {
        Some(s) => s.at(real),
        None => real,
    }
}

/// How long to wait, in real time, for `ms` of this clock to pass: `ms` itself, or less under
/// the scaled test clock.
pub fn real_wait(ms: i64) -> std::time::Duration {
    let ms = ms.max(0) as f64 / scale().map_or(1.0, |s| s.factor);
    std::time::Duration::from_millis(ms.ceil() as u64)
}

/// How far this clock moves while `real` passes on the wall clock: `real` itself, or more
/// under the scaled test clock (a period that real sleeps keep, read as this clock's ms).
pub fn clock_ms(real: std::time::Duration) -> i64 {
    (real.as_millis() as f64 * scale().map_or(1.0, |s| s.factor)) as i64
}

/// The scaled test clock: from `origin_ms` on, time runs `factor` times as fast.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// How much faster than the wall clock.
    pub factor: f64,
    /// The moment (real ms since the epoch) both clocks agree.
    pub origin_ms: i64,
}

impl Scale {
    /// Parses `SCALE@ORIGIN_MS`: a factor from 1 to 10000, and a moment.
    pub fn parse(text: &str) -> Option<Scale> {
        let (factor, origin) = text.trim().split_once('@')?;
        let factor: f64 = factor.parse().ok()?;
        let origin_ms: i64 = origin.parse().ok()?;
        ((1.0..=10_000.0).contains(&factor) && origin_ms >= 0)
            .then_some(Scale { factor, origin_ms })
    }

    /// This clock's reading when the wall clock reads `real_ms`.
    pub fn at(self, real_ms: i64) -> i64 {
        self.origin_ms + ((real_ms - self.origin_ms) as f64 * self.factor) as i64
    }
}

/// The scaled clock this process was started with, read once. A value that does not parse
/// stops the process: a test that asked for a fast clock must not run on a slow one.
fn scale() -> Option<Scale> {
    static SCALE: std::sync::OnceLock<Option<Scale>> = std::sync::OnceLock::new();
    *SCALE.get_or_init(|| {
        let name = crate::env_vars::LABPOOL_TEST_CLOCK_SCALE;
        let text = std::env::var(name).ok()?;
        match Scale::parse(&text) {
            Some(s) => Some(s),
            None => panic!(
                "{name}={text:?}: give SCALE@ORIGIN_MS, a factor from 1 to 10000 and a moment in ms since the epoch, e.g. 60@1765000000000; or unset it"
            ),
        }
    })
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

    #[test]
    fn a_scaled_clock_agrees_at_its_origin_and_runs_faster_after() {
        let s = Scale::parse("60@1000").unwrap();
        assert_eq!((s.at(1000), s.at(2000), s.at(1500)), (1000, 61_000, 31_000));
        for bad in ["60", "0@1000", "60@", "x@1", "20000@1", "60@-5", "@"] {
            assert_eq!(Scale::parse(bad), None, "{bad}");
        }
    }
}
