//! The wall clock, read in one place. The scheduler core never reads it; the daemons pass it in.

use labpool_scheduler::Timestamp;

/// Milliseconds since the Unix epoch.
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

/// Milliseconds since the epoch as a short local time for tables: `2026-12-02T15:04:05`.
pub fn short(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string(),
        None => ms.to_string(),
    }
}

/// An RFC 3339 time as milliseconds since the epoch.
pub fn parse_ms(rfc3339: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .map(|t| t.timestamp_millis())
}
