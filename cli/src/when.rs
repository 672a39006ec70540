//! Dates people type: `2026-11-01`, `2026-11-01T09:00`, `today`, `yesterday`, `3d` (ago).

use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, TimeZone};

/// Why a date was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid date '{0}': use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS], today, yesterday, or an age such as 3d or 12h"
)]
pub struct DateError(pub String);

/// Parses `text` as a point in time (ms since the epoch), relative words against `now`.
pub fn parse_when(text: &str, now: DateTime<Local>) -> Result<i64, DateError> {
    let t = text.trim();
    let err = || DateError(text.to_string());
    let midnight = |d: NaiveDate| -> Result<i64, DateError> {
        let naive = d.and_hms_opt(0, 0, 0).ok_or_else(err)?;
        Local
            .from_local_datetime(&naive)
            .earliest()
            .map(|t| t.timestamp_millis())
            .ok_or_else(err)
    };
    match t.to_ascii_lowercase().as_str() {
        "now" => return Ok(now.timestamp_millis()),
        "today" => return midnight(now.date_naive()),
        "yesterday" => return midnight(now.date_naive().pred_opt().ok_or_else(err)?),
        _ => {}
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return midnight(d);
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(t, fmt) {
            return Local
                .from_local_datetime(&naive)
                .earliest()
                .map(|t| t.timestamp_millis())
                .ok_or_else(err);
        }
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(d.timestamp_millis());
    }
    if let Ok(age) = labpool_units::parse_duration(t) {
        return Ok(now.timestamp_millis() - age.as_millis() as i64);
    }
    Err(err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let now = Local.with_ymd_and_hms(2026, 12, 2, 15, 30, 0).unwrap();
        let day = |y, m, d| {
            Local
                .with_ymd_and_hms(y, m, d, 0, 0, 0)
                .unwrap()
                .timestamp_millis()
        };
        assert_eq!(parse_when("today", now).unwrap(), day(2026, 12, 2));
        assert_eq!(parse_when("yesterday", now).unwrap(), day(2026, 12, 1));
        assert_eq!(parse_when("2026-11-01", now).unwrap(), day(2026, 11, 1));
        assert_eq!(
            parse_when("2026-11-01T01:00", now).unwrap(),
            day(2026, 11, 1) + 3_600_000
        );
        assert_eq!(
            parse_when("2h", now).unwrap(),
            now.timestamp_millis() - 7_200_000
        );
        assert!(parse_when("last week", now).is_err());
        assert!(parse_when("2026-13-01", now).is_err());
    }
}
