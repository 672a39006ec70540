//! Times as sbatch reads them for `--begin` and `--deadline` (Slurm's `parse_time`):
//! `now[+N[seconds|minutes|hours|days|weeks]]`, `HH:MM[:SS] [AM|PM]` (tomorrow when that time
//! has passed today), `midnight`, `noon`, `elevenses`, `fika`, `teatime`, `today`, `tomorrow`,
//! `MMDD[YY]`, `MM/DD[/YY]`, `MM.DD[.YY]` and `YYYY-MM-DD[THH:MM[:SS]]`, in local time.
//! The client reads them, so the controller is sent one instant and its own clock never
//! meets the user's time zone.

use chrono::{DateTime, Datelike, Local, NaiveDate, NaiveDateTime, NaiveTime, TimeZone};

/// A time sbatch would refuse too.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{flag} {text:?} is not a time: write now+N[minutes|hours|days|weeks], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], today, tomorrow, midnight, noon or teatime"
)]
pub struct BeginError {
    /// The option (`--begin`, `--deadline`).
    pub flag: &'static str,
    /// What was written.
    pub text: String,
}

/// Parses `text` against `now`, in ms since the epoch.
pub fn parse_slurm_time(
    flag: &'static str,
    text: &str,
    now: DateTime<Local>,
) -> Result<i64, BeginError> {
    let err = || BeginError {
        flag,
        text: text.to_string(),
    };
    let t = text.trim().to_ascii_lowercase();
    // Dates keep their `T` as written.
    let dated = text.trim().replacen('t', "T", 1);
    if let Some(rest) = t.strip_prefix("now") {
        return relative(rest, now).ok_or_else(err);
    }
    let today = now.date_naive();
    let at = |d: NaiveDate, time: NaiveTime| -> Option<i64> {
        Local
            .from_local_datetime(&d.and_time(time))
            .earliest()
            .map(|t| t.timestamp_millis())
    };
    let named = |h: u32| NaiveTime::from_hms_opt(h, 0, 0);
    // A time of day alone is today's, or tomorrow's once it has passed.
    let next = |time: NaiveTime| -> Option<i64> {
        let day = if time <= now.time() {
            today.succ_opt()?
        } else {
            today
        };
        at(day, time)
    };
    let midnight = NaiveTime::MIN;
    let found = match t.as_str() {
        "today" => at(today, midnight),
        "tomorrow" => at(today.succ_opt().ok_or_else(err)?, midnight),
        "midnight" => at(today.succ_opt().ok_or_else(err)?, midnight),
        "noon" => next(named(12).ok_or_else(err)?),
        "elevenses" => next(named(11).ok_or_else(err)?),
        "fika" => next(named(15).ok_or_else(err)?),
        "teatime" => next(named(16).ok_or_else(err)?),
        _ => None,
    };
    if found.is_some() {
        return found.ok_or_else(err);
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(&dated, fmt) {
            return at(dt.date(), dt.time()).ok_or_else(err);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(&t, "%Y-%m-%d") {
        return at(d, midnight).ok_or_else(err);
    }
    if let Some(time) = time_of_day(&t) {
        return next(time).ok_or_else(err);
    }
    if let Some(d) = month_day(&t, now.year()) {
        return at(d, midnight).ok_or_else(err);
    }
    Err(err())
}

/// [`parse_slurm_time`] against `now_ms` (ms since the epoch) instead of a clock reading.
pub fn parse_slurm_time_at(flag: &'static str, text: &str, now_ms: i64) -> Result<i64, BeginError> {
    let now = DateTime::from_timestamp_millis(now_ms)
        .unwrap_or_default()
        .with_timezone(&Local);
    parse_slurm_time(flag, text, now)
}

/// `+N[unit]` after `now` (or nothing: now itself).
fn relative(rest: &str, now: DateTime<Local>) -> Option<i64> {
    let base = now.timestamp_millis();
    let rest = rest.trim();
    if rest.is_empty() {
        return Some(base);
    }
    let (sign, rest) = match rest.as_bytes()[0] {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let n: i64 = rest[..digits].parse().ok()?;
    let unit = match rest[digits..].trim() {
        "" | "s" | "sec" | "second" | "seconds" => 1,
        "m" | "min" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 604_800,
        _ => return None,
    };
    Some(base + sign * n.checked_mul(unit)?.checked_mul(1000)?)
}

/// `HH:MM[:SS]`, with an optional `am`/`pm`.
fn time_of_day(t: &str) -> Option<NaiveTime> {
    let (clock, pm) = match t.strip_suffix("pm").or_else(|| t.strip_suffix("am")) {
        Some(c) => (c.trim(), Some(t.ends_with("pm"))),
        None => (t, None),
    };
    let mut parts = clock.split(':');
    let mut field = || parts.next().map(|p| p.parse::<u32>().ok());
    let h = field()??;
    let m = field()??;
    let s = field().unwrap_or(Some(0))?;
    if parts.next().is_some() {
        return None;
    }
    let h = match pm {
        Some(_) if h == 0 || h > 12 => return None,
        Some(true) => h % 12 + 12,
        Some(false) => h % 12,
        None => h,
    };
    NaiveTime::from_hms_opt(h, m, s)
}

/// `MMDD[YY]`, `MM/DD[/YY]` or `MM.DD[.YY]`; a two-digit year is 20YY.
fn month_day(t: &str, this_year: i32) -> Option<NaiveDate> {
    if !t.is_ascii() {
        return None;
    }
    let nums: Vec<&str> = if t.contains('/') {
        t.split('/').collect()
    } else if t.contains('.') {
        t.split('.').collect()
    } else if t.len() == 4 || t.len() == 6 {
        (0..t.len()).step_by(2).map(|i| &t[i..i + 2]).collect()
    } else {
        return None;
    };
    if !(2..=3).contains(&nums.len()) || nums.iter().any(|n| n.parse::<u32>().is_err()) {
        return None;
    }
    let month = nums[0].parse().ok()?;
    let day = nums[1].parse().ok()?;
    let year = match nums.get(2) {
        Some(y) if y.len() == 2 => 2000 + y.parse::<i32>().ok()?,
        Some(y) => y.parse().ok()?,
        None => this_year,
    };
    NaiveDate::from_ymd_opt(year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        Local
            .with_ymd_and_hms(y, mo, d, h, mi, s)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn slurm_forms() {
        let now = Local.with_ymd_and_hms(2026, 12, 4, 15, 30, 0).unwrap();
        let p = |t: &str| parse_slurm_time("--begin", t, now);
        let ms = now.timestamp_millis();
        assert_eq!(p("now"), Ok(ms));
        assert_eq!(p("now+60"), Ok(ms + 60_000));
        assert_eq!(p("now+1hour"), Ok(ms + 3_600_000));
        assert_eq!(p("now+2days"), Ok(ms + 2 * 86_400_000));
        assert_eq!(p("NOW+10minutes"), Ok(ms + 600_000));
        assert_eq!(p("16:00"), Ok(local(2026, 12, 4, 16, 0, 0)));
        // 10:00 has passed today: tomorrow's.
        assert_eq!(p("10:00:30"), Ok(local(2026, 12, 5, 10, 0, 30)));
        assert_eq!(p("4:00pm"), Ok(local(2026, 12, 4, 16, 0, 0)));
        assert_eq!(p("teatime"), Ok(local(2026, 12, 4, 16, 0, 0)));
        assert_eq!(p("noon"), Ok(local(2026, 12, 5, 12, 0, 0)));
        assert_eq!(p("midnight"), Ok(local(2026, 12, 5, 0, 0, 0)));
        assert_eq!(p("tomorrow"), Ok(local(2026, 12, 5, 0, 0, 0)));
        assert_eq!(p("2026-12-24"), Ok(local(2026, 12, 24, 0, 0, 0)));
        assert_eq!(p("2026-12-24T08:15"), Ok(local(2026, 12, 24, 8, 15, 0)));
        assert_eq!(p("12/24"), Ok(local(2026, 12, 24, 0, 0, 0)));
        assert_eq!(p("1224"), Ok(local(2026, 12, 24, 0, 0, 0)));
        assert_eq!(p("01.02.27"), Ok(local(2027, 1, 2, 0, 0, 0)));
        for bad in [
            "soon",
            "now+1fortnight",
            "25:00",
            "13/45",
            "now1",
            "2026-13-01",
            "",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert!(
            p("soon")
                .unwrap_err()
                .to_string()
                .contains("--begin \"soon\"")
        );
    }
}
