//! How long jobs really run: each user's ratio of run time to time limit, learned from their
//! finished jobs. Users overestimate limits (a 20-hour job gets `--time 2-00:00:00`), so start
//! times predicted from limits are pessimistic. Backfill must stay conservative and uses the
//! limits; predictions (which node to stage data on ahead of time) use these ratios.

use crate::job::JobSpec;
use crate::time::{TimeLimit, Timestamp};
use std::collections::BTreeMap;

/// Weight of the newest job in the moving average.
const ALPHA: f64 = 0.2;

/// Learned run-time ratios.
#[derive(Debug, Clone, Default)]
pub struct RuntimeBook {
    users: BTreeMap<String, f64>,
    all: Option<f64>,
}

impl RuntimeBook {
    /// Learns from a job that ran `ran_ms` of its limit.
    pub fn learn(&mut self, job: &JobSpec, ran_ms: i64) {
        let TimeLimit::Seconds(limit) = job.time_limit else {
            return;
        };
        if limit == 0 {
            return;
        }
        let ratio = (ran_ms.max(0) as f64 / (limit as f64 * 1000.0)).clamp(0.01, 1.0);
        let user = self.users.entry(job.user.clone()).or_insert(ratio);
        *user = (1.0 - ALPHA) * *user + ALPHA * ratio;
        let all = self.all.get_or_insert(ratio);
        *all = (1.0 - ALPHA) * *all + ALPHA * ratio;
    }

    /// The ratio expected for `user`'s jobs: theirs, else everyone's, else 1 (the limit).
    pub fn ratio(&self, user: &str) -> f64 {
        self.users.get(user).copied().or(self.all).unwrap_or(1.0)
    }

    /// How long `job` is expected to run, ms; `None` when it has no limit.
    pub fn expected_runtime_ms(&self, job: &JobSpec) -> Option<i64> {
        match job.time_limit {
            TimeLimit::Unlimited => None,
            TimeLimit::Seconds(s) => {
                Some((s as f64 * 1000.0 * self.ratio(&job.user)).round() as i64)
            }
        }
    }

    /// When a job started at `start` is expected to end. A job already past its expected end is
    /// expected halfway between now and its limit.
    pub fn expected_end(&self, job: &JobSpec, start: Timestamp, now: Timestamp) -> Timestamp {
        let Some(ms) = self.expected_runtime_ms(job) else {
            return Timestamp::NEVER;
        };
        let expected = Timestamp(start.0.saturating_add(ms));
        if expected > now {
            return expected;
        }
        let limit = start.plus_limit(job.time_limit);
        Timestamp(now.0 + ((limit.0 - now.0).max(2) / 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_per_user_with_a_fallback() {
        let mut b = RuntimeBook::default();
        let job = JobSpec {
            user: "a".into(),
            time_limit: TimeLimit::Seconds(100),
            ..JobSpec::default()
        };
        assert_eq!(b.ratio("a"), 1.0);
        b.learn(&job, 50_000);
        assert_eq!(b.ratio("a"), 0.5);
        assert_eq!(b.ratio("someone else"), 0.5);
        b.learn(&job, 100_000);
        assert!((b.ratio("a") - 0.6).abs() < 1e-12);
        assert_eq!(b.expected_runtime_ms(&job), Some(60_000));
        assert_eq!(
            b.expected_end(&job, Timestamp(0), Timestamp(10)),
            Timestamp(60_000)
        );
        // Past its expected end: halfway to the limit.
        assert_eq!(
            b.expected_end(&job, Timestamp(0), Timestamp(80_000)),
            Timestamp(90_000)
        );
    }
}
