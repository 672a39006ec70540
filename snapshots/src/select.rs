//! Which snapshot a restore reads: `--at latest|yesterday|today|DATE|TIME|SNAPSHOT`, and, by
//! default, the newest snapshot that holds the path.

use crate::browse;
use crate::error::{Result, SnapshotError};
use crate::repo::Repository;
use crate::snapshot::Snapshot;
use crate::tree::Node;
use chrono::{DateTime, Duration, FixedOffset, NaiveDate, NaiveTime, TimeZone, Utc};
use std::path::Path;

/// A point to restore from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The newest snapshot holding the path.
    Latest,
    /// The newest snapshot taken at or before this time that holds the path.
    Before(DateTime<Utc>),
    /// This snapshot (an id prefix).
    Snapshot(String),
}

impl At {
    /// Parses what a user types after `--at`; days end at midnight in `tz` (the lab's zone).
    pub fn parse(text: &str, now: DateTime<Utc>, tz: FixedOffset) -> Result<At> {
        let end_of = |d: NaiveDate| -> Result<At> {
            let next = d.succ_opt().unwrap_or(d).and_time(NaiveTime::MIN);
            let t = tz
                .from_local_datetime(&next)
                .single()
                .ok_or_else(|| SnapshotError::Invalid(format!("no such local time {next}")))?;
            Ok(At::Before(t.with_timezone(&Utc) - Duration::nanoseconds(1)))
        };
        let today = now.with_timezone(&tz).date_naive();
        match text {
            "latest" | "" => return Ok(At::Latest),
            "today" => return end_of(today),
            "yesterday" => return end_of(today.pred_opt().unwrap_or(today)),
            _ => {}
        }
        if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
            return end_of(d);
        }
        if let Ok(t) = DateTime::parse_from_rfc3339(text) {
            return Ok(At::Before(t.with_timezone(&Utc)));
        }
        if text.len() >= 4 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(At::Snapshot(text.to_ascii_lowercase()));
        }
        Err(SnapshotError::Invalid(format!(
            "--at {text:?} is not a snapshot id, a date (2026-11-30), a time (2026-11-30T18:00:00+08:00), \
             `yesterday`, `today` or `latest`"
        )))
    }
}

/// The snapshot to restore `path` from, and the path's node in it.
pub fn pick(
    repo: &Repository,
    path: &Path,
    at: &At,
    only_uid: Option<u32>,
) -> Result<(Snapshot, Node)> {
    let covering: Vec<Snapshot> = repo
        .snapshots()?
        .into_iter()
        .filter(|s| browse::relative(s, path).is_some())
        .collect();
    if covering.is_empty() {
        let mut roots: Vec<String> = repo
            .snapshots()?
            .iter()
            .map(|s| s.path.display().to_string())
            .collect();
        roots.sort();
        roots.dedup();
        let backed_up = if roots.is_empty() {
            "nothing is backed up yet".to_string()
        } else {
            format!("backed up: {}", roots.join(", "))
        };
        return Err(SnapshotError::NotInSnapshot {
            path: path.display().to_string(),
            within: "any snapshot".into(),
            hint: format!(
                ": no snapshot covers that directory ({backed_up}; `labpool snapshot list` shows each)"
            ),
        });
    }
    let candidates: Vec<&Snapshot> = match at {
        At::Latest => covering.iter().collect(),
        At::Before(t) => covering.iter().filter(|s| s.time <= *t).collect(),
        At::Snapshot(p) => {
            let s = repo.select(p)?;
            if browse::relative(&s, path).is_none() {
                return Err(SnapshotError::NotInSnapshot {
                    path: path.display().to_string(),
                    within: format!("snapshot {}", &s.id[..8.min(s.id.len())]),
                    hint: format!("; that snapshot holds {} only", s.path.display()),
                });
            }
            let node = browse::lookup(repo, &s, path, only_uid)?;
            return match node {
                Some(n) => Ok((s, n)),
                None => Err(not_found(
                    repo,
                    path,
                    &format!("snapshot {}", &s.id[..8.min(s.id.len())]),
                    only_uid,
                )?),
            };
        }
    };
    for s in candidates.iter().rev() {
        if let Some(n) = browse::lookup(repo, s, path, only_uid)? {
            return Ok(((*s).clone(), n));
        }
    }
    let within = match at {
        At::Before(t) => format!(
            "snapshots taken at or before {}",
            t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S")
        ),
        _ => "any snapshot".to_string(),
    };
    Err(not_found(repo, path, &within, only_uid)?)
}

fn not_found(
    repo: &Repository,
    path: &Path,
    within: &str,
    only_uid: Option<u32>,
) -> Result<SnapshotError> {
    let f = browse::find(repo, path, only_uid)?;
    let hint = match f.sightings.iter().rev().find(|s| s.present) {
        Some(s) => format!(
            "; it is in snapshot {} ({}): try --at {}",
            &s.snapshot[..8],
            s.time
                .with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S"),
            &s.snapshot[..8]
        ),
        None => "; no snapshot holds it (or it was not yours)".into(),
    };
    Ok(SnapshotError::NotInSnapshot {
        path: path.display().to_string(),
        within: within.to_string(),
        hint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_parses_days_in_the_lab_zone() {
        let now: DateTime<Utc> = "2026-12-02T01:00:00Z".parse().unwrap();
        let cst = FixedOffset::east_opt(8 * 3600).unwrap();
        // 01:00 UTC is 09:00 on Dec 2 in UTC+8: yesterday is Dec 1 there, ending 16:00 UTC.
        assert_eq!(
            At::parse("yesterday", now, cst).unwrap(),
            At::Before("2026-12-01T15:59:59.999999999Z".parse().unwrap())
        );
        assert_eq!(
            At::parse("2026-11-30", now, FixedOffset::east_opt(0).unwrap()).unwrap(),
            At::Before("2026-11-30T23:59:59.999999999Z".parse().unwrap())
        );
        assert_eq!(
            At::parse("ab12cd", now, cst).unwrap(),
            At::Snapshot("ab12cd".into())
        );
        assert!(At::parse("last tuesday", now, cst).is_err());
    }
}
