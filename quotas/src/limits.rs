//! Limits and the decision a submit takes from them.
//!
//! A limit is on allocated bytes (what `du` shows, what fills the disk) and on entries (files,
//! directories and links: inodes), each with an optional soft and hard value. Over the hard
//! value, or over the soft value for longer than the grace period, new jobs are refused; at 90%
//! of the limit that applies they are warned. Running jobs are never touched. Everything here
//! takes `now` as an argument, so grace expiry is tested with a simulated clock.

use crate::QuotaError;
use labpool_units::{format_duration_approx, format_size};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The grace period when none is given: a week, as `edquota` uses.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(7 * 86_400);

/// Warn at this fraction of a limit.
pub const WARN_FRACTION: f64 = 0.9;

/// One user's (or the default) limit on one file system. `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Limit {
    /// Soft limit on allocated bytes.
    pub soft_bytes: Option<u64>,
    /// Hard limit on allocated bytes.
    pub hard_bytes: Option<u64>,
    /// Soft limit on entries.
    pub soft_files: Option<u64>,
    /// Hard limit on entries.
    pub hard_files: Option<u64>,
    /// How long usage may stay over a soft limit; [`DEFAULT_GRACE`] when `None`.
    pub grace_secs: Option<u64>,
}

impl Limit {
    /// Checks that each soft value is at most its hard value.
    pub fn validate(&self) -> Result<(), QuotaError> {
        if let (Some(s), Some(h)) = (self.soft_bytes, self.hard_bytes)
            && s > h
        {
            return Err(QuotaError::SoftAboveHard {
                what: "bytes",
                soft: format_size(s),
                hard: format_size(h),
            });
        }
        if let (Some(s), Some(h)) = (self.soft_files, self.hard_files)
            && s > h
        {
            return Err(QuotaError::SoftAboveHard {
                what: "files",
                soft: s.to_string(),
                hard: h.to_string(),
            });
        }
        Ok(())
    }

    /// The grace period.
    pub fn grace(&self) -> Duration {
        self.grace_secs.map_or(DEFAULT_GRACE, Duration::from_secs)
    }

    /// No limit of any kind.
    pub fn is_unlimited(&self) -> bool {
        self.soft_bytes.is_none()
            && self.hard_bytes.is_none()
            && self.soft_files.is_none()
            && self.hard_files.is_none()
    }

    /// Whether `usage` is over a soft limit (strictly above it).
    pub fn over_soft(&self, usage: &Usage) -> bool {
        self.soft_bytes.is_some_and(|s| usage.bytes > s)
            || self.soft_files.is_some_and(|s| usage.files > s)
    }
}

/// What one user holds on one file system, from a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Allocated bytes (`du -B1`).
    pub bytes: u64,
    /// Entries (inodes).
    pub files: u64,
}

/// Why a submit is refused or warned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// At or over a hard limit: the disk refuses more, so jobs would fail.
    OverHard {
        /// "bytes" or "files".
        what: String,
        /// Usage.
        used: u64,
        /// The limit.
        limit: u64,
    },
    /// Over a soft limit past its grace.
    GraceExpired {
        /// "bytes" or "files".
        what: String,
        /// Usage.
        used: u64,
        /// The limit.
        limit: u64,
        /// Since when the usage was over it, ms.
        since_ms: i64,
    },
    /// Over a soft limit, within grace.
    InGrace {
        /// "bytes" or "files".
        what: String,
        /// Usage.
        used: u64,
        /// The limit.
        limit: u64,
        /// Grace left, seconds.
        left_secs: u64,
    },
    /// At 90% or more of the limit that applies (soft if set, else hard).
    Near {
        /// "bytes" or "files".
        what: String,
        /// Usage.
        used: u64,
        /// The limit.
        limit: u64,
    },
}

impl Finding {
    /// Whether it refuses a submit.
    pub fn refuses(&self) -> bool {
        matches!(
            self,
            Finding::OverHard { .. } | Finding::GraceExpired { .. }
        )
    }

    /// One line: `scratch: 80M used of a 64M hard limit`.
    pub fn describe(&self, fs: &str) -> String {
        let amount = |what: &str, n: u64| {
            if what == "bytes" {
                format_size(n)
            } else {
                format!("{n} files")
            }
        };
        match self {
            Finding::OverHard { what, used, limit } => format!(
                "{fs}: {} used, at or over the hard limit of {}",
                amount(what, *used),
                amount(what, *limit)
            ),
            Finding::GraceExpired {
                what, used, limit, ..
            } => format!(
                "{fs}: {} used, over the soft limit of {} for longer than the grace period",
                amount(what, *used),
                amount(what, *limit)
            ),
            Finding::InGrace {
                what,
                used,
                limit,
                left_secs,
            } => format!(
                "{fs}: {} used, over the soft limit of {}; {} of grace left before new jobs are refused",
                amount(what, *used),
                amount(what, *limit),
                format_duration_approx(Duration::from_secs(*left_secs))
            ),
            Finding::Near { what, used, limit } => format!(
                "{fs}: {} used of {} ({:.0}%)",
                amount(what, *used),
                amount(what, *limit),
                100.0 * *used as f64 / (*limit).max(1) as f64
            ),
        }
    }
}

/// The decision for one user on one file system: every finding, worst first.
///
/// `over_soft_since_ms` is when a scan first found the usage over a soft limit (kept by the
/// caller; `None` if it was not). Usage over a soft limit with no record yet counts from `now`.
pub fn evaluate(
    limit: &Limit,
    usage: &Usage,
    over_soft_since_ms: Option<i64>,
    now_ms: i64,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let grace_ms = limit.grace().as_millis() as i64;
    for (what, used, soft, hard) in [
        ("bytes", usage.bytes, limit.soft_bytes, limit.hard_bytes),
        ("files", usage.files, limit.soft_files, limit.hard_files),
    ] {
        let what = what.to_string();
        if let Some(h) = hard
            && used >= h
        {
            findings.push(Finding::OverHard {
                what,
                used,
                limit: h,
            });
            continue;
        }
        if let Some(s) = soft
            && used > s
        {
            let since = over_soft_since_ms.unwrap_or(now_ms);
            let ends = since.saturating_add(grace_ms);
            if now_ms >= ends {
                findings.push(Finding::GraceExpired {
                    what,
                    used,
                    limit: s,
                    since_ms: since,
                });
            } else {
                findings.push(Finding::InGrace {
                    what,
                    used,
                    limit: s,
                    left_secs: ((ends - now_ms) / 1000) as u64,
                });
            }
            continue;
        }
        if let Some(l) = soft.or(hard)
            && used as f64 >= WARN_FRACTION * l as f64
        {
            findings.push(Finding::Near {
                what,
                used,
                limit: l,
            });
        }
    }
    findings.sort_by_key(|f| !f.refuses());
    findings
}

/// How full a user is against a limit, in percent of the limit that applies to bytes (soft if
/// set, else hard), or of files when only files are limited. `None` when nothing is limited.
pub fn percent_used(limit: &Limit, usage: &Usage) -> Option<f64> {
    let pct = |used: u64, l: u64| 100.0 * used as f64 / l.max(1) as f64;
    let bytes = limit
        .soft_bytes
        .or(limit.hard_bytes)
        .map(|l| pct(usage.bytes, l));
    let files = limit
        .soft_files
        .or(limit.hard_files)
        .map(|l| pct(usage.files, l));
    match (bytes, files) {
        (Some(b), Some(f)) => Some(b.max(f)),
        (b, f) => b.or(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    fn limit() -> Limit {
        Limit {
            soft_bytes: Some(80),
            hard_bytes: Some(100),
            soft_files: None,
            hard_files: Some(10),
            grace_secs: Some(7 * 86_400),
        }
    }

    #[test]
    fn under_everything_is_fine() {
        assert!(
            evaluate(
                &limit(),
                &Usage {
                    bytes: 50,
                    files: 3
                },
                None,
                0
            )
            .is_empty()
        );
    }

    #[test]
    fn ninety_percent_of_the_applying_limit_warns() {
        let f = evaluate(
            &limit(),
            &Usage {
                bytes: 72,
                files: 9,
            },
            None,
            0,
        );
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().all(|f| !f.refuses()));
        assert!(matches!(&f[0], Finding::Near { limit: 80, .. }));
        assert!(matches!(&f[1], Finding::Near { limit: 10, .. }));
    }

    #[test]
    fn at_the_hard_limit_refuses() {
        let f = evaluate(
            &limit(),
            &Usage {
                bytes: 100,
                files: 1,
            },
            Some(0),
            0,
        );
        assert_eq!(
            f,
            vec![Finding::OverHard {
                what: "bytes".into(),
                used: 100,
                limit: 100
            }]
        );
        assert_eq!(
            f[0].describe("scratch"),
            "scratch: 100B used, at or over the hard limit of 100B"
        );
    }

    #[test]
    fn grace_runs_out_on_a_simulated_clock() {
        let l = limit();
        let u = Usage {
            bytes: 90,
            files: 1,
        };
        let since = 5 * DAY;
        // Day 5: just over; a week of grace.
        let f = evaluate(&l, &u, Some(since), since);
        assert!(matches!(&f[0], Finding::InGrace { left_secs, .. } if *left_secs == 7 * 86_400));
        // Day 11 and a half: half a day left, still only a warning.
        let f = evaluate(&l, &u, Some(since), since + 6 * DAY + DAY / 2);
        assert!(matches!(&f[0], Finding::InGrace { left_secs, .. } if *left_secs == 43_200));
        assert!(!f[0].refuses());
        // Day 12: the grace is over.
        let f = evaluate(&l, &u, Some(since), since + 7 * DAY);
        assert!(f[0].refuses(), "{f:?}");
        assert!(matches!(&f[0], Finding::GraceExpired { since_ms, .. } if *since_ms == since));
        // Back under the soft limit: nothing, whatever the record says.
        assert!(
            evaluate(
                &l,
                &Usage {
                    bytes: 10,
                    files: 1
                },
                Some(since),
                since + 30 * DAY
            )
            .is_empty()
        );
    }

    #[test]
    fn soft_above_hard_is_refused() {
        let mut l = limit();
        l.soft_bytes = Some(200);
        let e = l.validate().unwrap_err().to_string();
        assert!(
            e.contains("soft limit on bytes (200B) is above the hard limit (100B)"),
            "{e}"
        );
        l.soft_bytes = None;
        l.soft_files = Some(11);
        assert!(l.validate().is_err());
    }

    #[test]
    fn percent_takes_the_fuller_of_bytes_and_files() {
        let p = percent_used(
            &limit(),
            &Usage {
                bytes: 40,
                files: 8,
            },
        )
        .unwrap();
        assert!((p - 80.0).abs() < 1e-9);
        assert_eq!(percent_used(&Limit::default(), &Usage::default()), None);
    }
}
