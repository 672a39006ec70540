//! How values are written in the file and read from it: durations (`"30s"`), Slurm time
//! limits (`"1-00:00:00"`), memory (`"60G"`, in MiB), byte sizes and rates (`"500G"`,
//! `"200M"`). The `ser_*` halves write durations and time limits back in the same forms, for
//! `--show-settings`.

use labpool_scheduler::time::{TimeLimit, parse_time_limit};
use labpool_units::parse_mem_mib;
use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

pub(super) fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    labpool_units::parse_duration(&s).map_err(serde::de::Error::custom)
}

pub(super) fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<TimeLimit, D::Error> {
    let s = String::deserialize(d)?;
    parse_time_limit(&s).map_err(serde::de::Error::custom)
}

pub(super) fn de_opt_mem<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    parse_mem_mib(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

pub(super) fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = String::deserialize(d)?;
    labpool_units::parse_size(&s).map_err(serde::de::Error::custom)
}

pub(super) fn de_opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    labpool_units::parse_size(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

pub(super) fn de_opt_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    labpool_units::parse_rate(&s)
        .map(|r| Some(r as u64))
        .map_err(serde::de::Error::custom)
}

/// A duration as labpool prints durations (`30s`, `5m`, `7d`).
pub(super) fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&labpool_units::format_duration(*d))
}

/// A time limit in Slurm format (`1-00:00:00`, `30:00`, `UNLIMITED`).
pub(super) fn ser_time<S: Serializer>(t: &TimeLimit, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

/// `true`, for `#[serde(default = "yes")]`.
pub(super) fn yes() -> bool {
    true
}

/// An optional duration: absent, or `"off"`, means none.
pub(super) fn de_opt_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    let s = String::deserialize(d)?;
    if s == "off" {
        return Ok(None);
    }
    labpool_units::parse_duration(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// An optional key's duration, present (`"30m"`): for `#[serde(default)]` keys, where absent
/// means none.
pub(super) fn de_some_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

/// An optional duration, written back as `"off"` when there is none.
pub(super) fn ser_opt_duration<S: Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.collect_str("off"),
    }
}

/// A `listen` key's problem, if any: it must be `HOST:PORT` or `"off"`.
pub(super) fn listen_problem(section: &str, listen: &str, example: &str) -> Option<String> {
    (listen != "off"
        && listen
            .rsplit_once(':')
            .is_none_or(|(_, p)| p.parse::<u16>().is_err()))
    .then(|| {
        format!("[{section}] listen {listen:?}: give HOST:PORT (e.g. \"{example}\"), or \"off\"")
    })
}
