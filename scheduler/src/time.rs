//! Time as the core sees it: timestamps passed in by the caller, and Slurm's time-limit formats.
//!
//! The core never reads a clock. The daemon passes the wall clock in, the simulator a simulated one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Milliseconds since the Unix epoch. The caller supplies it; the core never reads a clock.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The far future: what never comes.
    pub const NEVER: Timestamp = Timestamp(i64::MAX);

    /// This timestamp plus a time limit; [`Timestamp::NEVER`] for an unlimited one.
    pub fn plus_limit(self, limit: TimeLimit) -> Timestamp {
        match limit {
            TimeLimit::Unlimited => Timestamp::NEVER,
            TimeLimit::Seconds(s) => self.plus_secs(s),
        }
    }

    /// This timestamp plus `secs` seconds.
    pub fn plus_secs(self, secs: u64) -> Timestamp {
        Timestamp(self.0.saturating_add((secs as i64).saturating_mul(1000)))
    }

    /// Whole seconds from `earlier` to `self`, zero when `earlier` is later.
    pub fn secs_since(self, earlier: Timestamp) -> u64 {
        (self.0.saturating_sub(earlier.0).max(0) / 1000) as u64
    }
}

/// A job's wall-time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TimeLimit {
    /// No limit of its own: the partition's maximum applies, if it has one.
    #[default]
    Unlimited,
    /// At most this many seconds.
    Seconds(u64),
}

/// Why a time string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid time '{0}': use minutes (90), MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (2-00:00:00), or UNLIMITED"
)]
pub struct TimeParseError(pub String);

/// Parses a time limit in any of Slurm's formats.
///
/// `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`; `0`, `UNLIMITED` and `INFINITE`
/// mean no limit of the job's own.
///
/// ```
/// use labpool_scheduler::time::{parse_time_limit, TimeLimit};
/// assert_eq!(parse_time_limit("90").unwrap(), TimeLimit::Seconds(90 * 60));
/// assert_eq!(parse_time_limit("1-02:03:04").unwrap(), TimeLimit::Seconds(93_784));
/// assert!(parse_time_limit("1:2:3:4").is_err());
/// ```
pub fn parse_time_limit(text: &str) -> Result<TimeLimit, TimeParseError> {
    let err = || TimeParseError(text.to_string());
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") {
        return Ok(TimeLimit::Unlimited);
    }
    let num = |s: &str| -> Result<u64, TimeParseError> {
        if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        s.parse().map_err(|_| err())
    };
    let secs = if let Some((days, rest)) = t.split_once('-') {
        let days = num(days)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (h, m, s) = match parts.as_slice() {
            [h] => (num(h)?, 0, 0),
            [h, m] => (num(h)?, num(m)?, 0),
            [h, m, s] => (num(h)?, num(m)?, num(s)?),
            _ => return Err(err()),
        };
        if h >= 24 || m >= 60 || s >= 60 {
            return Err(err());
        }
        days * 86_400 + h * 3600 + m * 60 + s
    } else {
        let parts: Vec<&str> = t.split(':').collect();
        match parts.as_slice() {
            [m] => num(m)? * 60,
            [m, s] => {
                let s = num(s)?;
                if s >= 60 {
                    return Err(err());
                }
                num(m)? * 60 + s
            }
            [h, m, s] => {
                let (m, s) = (num(m)?, num(s)?);
                if m >= 60 || s >= 60 {
                    return Err(err());
                }
                num(h)? * 3600 + m * 60 + s
            }
            _ => return Err(err()),
        }
    };
    Ok(if secs == 0 {
        TimeLimit::Unlimited
    } else {
        TimeLimit::Seconds(secs)
    })
}

impl fmt::Display for TimeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeLimit::Unlimited => f.write_str("UNLIMITED"),
            TimeLimit::Seconds(s) => f.write_str(&labpool_units::format_elapsed(*s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_formats() {
        let s = |t: &str| match parse_time_limit(t).unwrap() {
            TimeLimit::Seconds(s) => s,
            TimeLimit::Unlimited => 0,
        };
        assert_eq!(s("5"), 300);
        assert_eq!(s("5:30"), 330);
        assert_eq!(s("0:02"), 2);
        assert_eq!(s("24:00:00"), 86_400);
        assert_eq!(s("72:00:00"), 259_200);
        assert_eq!(s("2-12"), 2 * 86_400 + 12 * 3600);
        assert_eq!(s("2-12:30"), 2 * 86_400 + 12 * 3600 + 1800);
        assert_eq!(s("7-00:00:00"), 7 * 86_400);
        assert_eq!(parse_time_limit("UNLIMITED").unwrap(), TimeLimit::Unlimited);
        assert_eq!(parse_time_limit("0").unwrap(), TimeLimit::Unlimited);
    }

    #[test]
    fn malformed_times_are_refused() {
        for bad in [
            "", "abc", "1:2:3:4", "1h", "-5", "1-", "1-25", "10:61", "1:00:60", "1.5", " : ",
        ] {
            assert!(parse_time_limit(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn timestamps() {
        let t = Timestamp(1_000);
        assert_eq!(t.plus_secs(2), Timestamp(3_000));
        assert_eq!(Timestamp(5_500).secs_since(t), 4);
        assert_eq!(t.secs_since(Timestamp(5_500)), 0);
    }
}
