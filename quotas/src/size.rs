//! Limits as admins type them: a size in labpool's one grammar ([`labpool_units`]: binary, so
//! `50G` is 50 GiB, as `du -h` prints it) or `none`, and file counts.

use crate::QuotaError;
use std::time::Duration;

/// Parses a byte limit: a size (`500M`, `1.5T`, `2GiB`) or `none` (no limit: `None`).
pub fn parse_size(text: &str) -> Result<Option<u64>, QuotaError> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    labpool_units::parse_size(text)
        .map(Some)
        .map_err(|_| QuotaError::BadSize {
            text: text.to_string(),
        })
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

/// Parses a grace period or an age: `7d`, `36h`, `1w`, `30m`.
pub fn parse_duration(text: &str) -> Result<Duration, QuotaError> {
    labpool_units::parse_duration(text).map_err(|_| QuotaError::BadDuration {
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_sizes_or_none() {
        assert_eq!(parse_size("50G").unwrap(), Some(50 << 30));
        assert_eq!(parse_size("none").unwrap(), None);
        assert!(parse_size("-5G").is_err());
        assert_eq!(parse_count("100_000").unwrap(), Some(100_000));
        assert!(parse_count("-1").is_err());
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert!(parse_duration("soon").is_err());
    }
}
