//! Durations: read as humantime writes them (`30s`, `2m 30s`, `7d`), printed in the same
//! units, and Slurm's elapsed-time form for time columns.

use crate::UnitError;
use std::time::Duration;

/// Parses `30s`, `5m`, `36h`, `7d`, `1w`, `2m 30s`, `500ms`.
///
/// ```
/// use labpool_units::parse_duration;
/// assert_eq!(parse_duration("2m 30s").unwrap().as_secs(), 150);
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    humantime::parse_duration(text.trim()).map_err(|_| UnitError::Duration(text.to_string()))
}

/// The one way labpool prints a duration: its nonzero units from days down to milliseconds,
/// largest first (`7d`, `1d 12h`, `2m 30s`, `500ms`, `0s`). [`parse_duration`] reads it back
/// to the same value.
///
/// ```
/// use labpool_units::format_duration;
/// use std::time::Duration;
/// assert_eq!(format_duration(Duration::from_secs(36 * 3600)), "1d 12h");
/// ```
pub fn format_duration(d: Duration) -> String {
    print(d, usize::MAX)
}

/// [`format_duration`] to its two largest units, rounded down: `6d 23h` for a grace period
/// with 6 d 23 h 59 m left, `3h 5m`, `45s`.
///
/// ```
/// use labpool_units::format_duration_approx;
/// use std::time::Duration;
/// assert_eq!(format_duration_approx(Duration::from_secs(6 * 86_400 + 86_399)), "6d 23h");
/// ```
pub fn format_duration_approx(d: Duration) -> String {
    print(d, 2)
}

fn print(d: Duration, units: usize) -> String {
    let s = d.as_secs();
    let parts = [
        (s / 86_400, "d"),
        (s % 86_400 / 3600, "h"),
        (s % 3600 / 60, "m"),
        (s % 60, "s"),
        (u64::from(d.subsec_millis()), "ms"),
    ];
    let mut out: Vec<String> = Vec::new();
    let mut started = false;
    let mut taken = 0;
    for (n, unit) in parts {
        if taken == units {
            break;
        }
        started |= n > 0;
        if started {
            taken += 1;
            if n > 0 {
                out.push(format!("{n}{unit}"));
            }
        }
    }
    if out.is_empty() {
        "0s".to_string()
    } else {
        out.join(" ")
    }
}

/// Seconds the way Slurm prints elapsed times and limits: `M:SS`, `H:MM:SS` or `D-HH:MM:SS`.
///
/// ```
/// use labpool_units::format_elapsed;
/// assert_eq!(format_elapsed(59), "0:59");
/// assert_eq!(format_elapsed(3_725), "1:02:05");
/// assert_eq!(format_elapsed(90_061), "1-01:01:01");
/// ```
pub fn format_elapsed(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn printed() {
        let f = |s: u64| format_duration(Duration::from_secs(s));
        assert_eq!(f(0), "0s");
        assert_eq!(f(2), "2s");
        assert_eq!(f(90), "1m 30s");
        assert_eq!(f(7 * 86_400), "7d");
        assert_eq!(f(3600 + 5), "1h 5s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        let a = |s: u64| format_duration_approx(Duration::from_secs(s));
        assert_eq!(a(185 * 60), "3h 5m");
        assert_eq!(a(3600 + 5), "1h");
        assert_eq!(a(45), "45s");
        assert!(parse_duration("soon").is_err());
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
    }

    proptest! {
        #[test]
        fn exact_durations_read_back(ms in 0u64..(400 * 86_400_000)) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }
}
