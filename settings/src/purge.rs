//! `[purge]`: the scratch purge.

use super::check_schedule;
use super::values::{de_duration, ser_duration};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[purge]`: files in scratch untouched this long are deleted, after a notice.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PurgeConfig {
    /// Run the scheduled purge in the controller.
    pub enabled: bool,
    /// When (crontab syntax).
    pub schedule: String,
    /// Age after which a file goes (newest of atime, mtime, ctime).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub max_age: Duration,
    /// Days of notice before a file goes.
    pub warn_days: u32,
}

impl Default for PurgeConfig {
    fn default() -> Self {
        PurgeConfig {
            enabled: true,
            schedule: "0 4 * * *".to_string(),
            max_age: Duration::from_secs(30 * 86_400),
            warn_days: 7,
        }
    }
}

impl PurgeConfig {
    /// `schedule` parses.
    pub(super) fn check_schedule(&self) -> Result<(), String> {
        check_schedule("[purge] schedule", &self.schedule)
    }

    /// `max_age` is longer than the notice.
    pub(super) fn check_max_age(&self) -> Result<(), String> {
        if self.max_age.as_secs() <= u64::from(self.warn_days) * 86_400 {
            return Err(format!(
                "[purge]: max_age ({}) must be longer than warn_days ({} days)",
                labpool_units::format_duration(self.max_age),
                self.warn_days
            ));
        }
        Ok(())
    }
}
