//! Sizes as `du -h` prints them (binary units, so `50G` is 50 GiB) and durations (`7d`).
//!
//! Hand-written because the crates that parse sizes read `G` as 10^9; `du -h`, `df -h` and
//! Slurm's `--mem` all read it as 2^30, and that is what admins type.

use crate::QuotaError;
use std::time::Duration;

const UNITS: [(char, u32); 5] = [('K', 10), ('M', 20), ('G', 30), ('T', 40), ('P', 50)];

/// Parses `500M`, `1.5T`, `4096`, `2GiB` (a trailing `B` or `iB` is allowed) or `none`
/// (no limit: `None`). Negative numbers, unknown units and overflows are errors.
pub fn parse_size(text: &str) -> Result<Option<u64>, QuotaError> {
    let bad = || QuotaError::BadSize {
        text: text.to_string(),
    };
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let upper = t.to_ascii_uppercase();
    let stripped = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (number, shift) = match stripped.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => {
            let (_, shift) = UNITS.iter().find(|(u, _)| *u == c).ok_or_else(bad)?;
            (&stripped[..stripped.len() - 1], *shift)
        }
        Some(_) => (stripped, 0),
        None => return Err(bad()),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(Some(bytes.round() as u64))
}

/// Parses a file count (`100000`, `1M` is not taken: counts are plain numbers) or `none`.
pub fn parse_count(text: &str) -> Result<Option<u64>, QuotaError> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    t.replace('_', "")
        .parse::<u64>()
        .map(Some)
        .map_err(|_| QuotaError::BadCount {
            text: text.to_string(),
        })
}

/// Parses `7d`, `36h`, `1w`, `30m` (humantime's units).
pub fn parse_duration(text: &str) -> Result<Duration, QuotaError> {
    humantime::parse_duration(text.trim()).map_err(|_| QuotaError::BadDuration {
        text: text.to_string(),
    })
}

/// A size as `du -h` prints it: `0`, `512`, `4.0K`, `1.5G`, `12G`.
pub fn format_size(bytes: u64) -> String {
    if bytes < 1024 {
        return bytes.to_string();
    }
    let mut value = bytes as f64;
    let mut unit = ' ';
    for (u, _) in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if value < 10.0 {
        format!("{value:.1}{unit}")
    } else {
        format!("{value:.0}{unit}")
    }
}

/// A duration in its two largest units: `6d 23h`, `3h 5m`, `45s`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (days, hours, minutes) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, m) => format!("{h}h {m}m"),
        (d, h, _) => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary_like_du() {
        assert_eq!(parse_size("50G").unwrap(), Some(50 << 30));
        assert_eq!(parse_size("1.5T").unwrap(), Some(3 << 39));
        assert_eq!(parse_size("500m").unwrap(), Some(500 << 20));
        assert_eq!(parse_size("2GiB").unwrap(), Some(2 << 30));
        assert_eq!(parse_size("4096").unwrap(), Some(4096));
        assert_eq!(parse_size("8P").unwrap(), Some(8 << 50));
        assert_eq!(parse_size("none").unwrap(), None);
        for bad in [
            "",
            "-5G",
            "5X",
            "G",
            "1e3",
            "5 G",
            "1.2.3M",
            "99999999999999999999T",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn sizes_print_like_du() {
        assert_eq!(format_size(0), "0");
        assert_eq!(format_size(1023), "1023");
        assert_eq!(format_size(4096), "4.0K");
        assert_eq!(format_size(3 << 29), "1.5G");
        assert_eq!(format_size(50 << 30), "50G");
    }

    #[test]
    fn counts_and_durations() {
        assert_eq!(parse_count("100_000").unwrap(), Some(100_000));
        assert!(parse_count("-1").is_err());
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert!(parse_duration("soon").is_err());
        assert_eq!(
            format_duration(Duration::from_secs(6 * 86_400 + 23 * 3600)),
            "6d 23h"
        );
        assert_eq!(format_duration(Duration::from_secs(185 * 60)), "3h 5m");
    }
}
