//! Idle interactive sessions, measured on the GPU. A session is busy while its GPUs compute (at
//! or over its partition's utilisation mark) or its member types (its host reports input); a
//! session that is neither for the partition's `idle_after` is told, and stopped when it is
//! still idle a grace later. A training loop watched in silence is busy; a notebook kernel that
//! holds a card and computes nothing is idle, however much memory it holds.
//!
//! Deterministic: [`Watch::step`] takes `now` and what was seen, and keeps, per session, when
//! it was last busy and when it was told.

use std::collections::BTreeMap;

/// The rule of a session's partition, in ms and percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// A GPU at or over this utilisation, percent, is busy.
    pub busy_percent: f64,
    /// Idle this long: told.
    pub idle_after_ms: i64,
    /// Told this long ago and still idle: stopped.
    pub grace_ms: i64,
}

/// One running session, as seen at this step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen {
    /// The job.
    pub job: u64,
    /// When it started, ms.
    pub started_ms: i64,
    /// The highest utilisation among its GPUs in its node's latest fresh sample; `None` for a
    /// session without GPUs or without a fresh reading (no evidence either way).
    pub gpu_util: Option<f64>,
    /// When its member last typed (or a notebook kernel last ran), as its host reported.
    pub last_input_ms: Option<i64>,
    /// Its partition's rule.
    pub rule: Rule,
}

/// What is due for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Tell its member it is idle and will be stopped after the grace.
    Warn,
    /// Busy again after a warning: the warning no longer holds.
    Back,
    /// Stop it: still idle a grace after the warning.
    Stop,
}

/// A session due an action, and for how long it has been idle, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Due {
    /// The job.
    pub job: u64,
    /// What to do.
    pub action: Action,
    /// How long it has been idle at this step.
    pub idle_ms: i64,
    /// Its rule.
    pub rule: Rule,
}

/// When each session was last busy, and when it was told.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    busy: BTreeMap<u64, i64>,
    told: BTreeMap<u64, i64>,
}

impl Watch {
    /// The actions due at `now_ms` for the sessions `seen`, in job order. Sessions no longer
    /// seen are forgotten.
    pub fn step(&mut self, now_ms: i64, seen: &[Seen]) -> Vec<Due> {
        let mut sorted: Vec<&Seen> = seen.iter().collect();
        sorted.sort_by_key(|s| s.job);
        self.busy
            .retain(|job, _| sorted.iter().any(|s| s.job == *job));
        self.told
            .retain(|job, _| sorted.iter().any(|s| s.job == *job));
        let mut due = Vec::new();
        for s in sorted {
            let computing = s.gpu_util.is_some_and(|u| u >= s.rule.busy_percent);
            let last = self.busy.entry(s.job).or_insert(s.started_ms);
            *last = (*last)
                .max(s.started_ms)
                .max(s.last_input_ms.unwrap_or(i64::MIN));
            if computing {
                *last = now_ms;
            }
            let idle_ms = now_ms - *last;
            let mut push = |action| {
                due.push(Due {
                    job: s.job,
                    action,
                    idle_ms,
                    rule: s.rule,
                })
            };
            match self.told.get(&s.job).copied() {
                Some(told) if *last > told => {
                    self.told.remove(&s.job);
                    push(Action::Back);
                }
                Some(told) if now_ms >= told.saturating_add(s.rule.grace_ms) => {
                    // Stopped once; the job's end removes it from what is seen.
                    self.told.insert(s.job, i64::MAX);
                    push(Action::Stop);
                }
                Some(_) => {}
                None if idle_ms >= s.rule.idle_after_ms => {
                    self.told.insert(s.job, now_ms);
                    push(Action::Warn);
                }
                None => {}
            }
        }
        due
    }
}

/// A suspended session (its GPU state in host memory, its GPUs given back), as seen at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenSuspended {
    /// The job.
    pub job: u64,
    /// When it was suspended, ms.
    pub since_ms: i64,
    /// When its member last typed (or its notebook's kernel last ran), as its host reported.
    pub last_input_ms: Option<i64>,
}

/// What is due for a suspended session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SuspendAction {
    /// Tell its member it is suspended, and how to get it back.
    Told,
    /// Its member is back: it wants its GPUs again.
    WantBack,
    /// It holds its GPUs again: tell its member.
    Resumed,
}

/// The suspended sessions told so far, with when each was suspended and whether its member
/// came back. Deterministic: [`SuspendWatch::step`] takes what was seen, in job order.
#[derive(Debug, Clone, Default)]
pub struct SuspendWatch {
    told: BTreeMap<u64, (i64, bool)>,
}

impl SuspendWatch {
    /// What is due for the sessions `suspended` now, and for those told before that are among
    /// the `running` sessions but suspended no longer, in job order.
    pub fn step(
        &mut self,
        suspended: &[SeenSuspended],
        running: &[u64],
    ) -> Vec<(u64, SuspendAction)> {
        let mut due = Vec::new();
        let mut sorted: Vec<&SeenSuspended> = suspended.iter().collect();
        sorted.sort_by_key(|s| s.job);
        for s in &sorted {
            let entry = self.told.entry(s.job).or_insert_with(|| {
                due.push((s.job, SuspendAction::Told));
                (s.since_ms, false)
            });
            if entry.0 != s.since_ms {
                // Suspended again since.
                *entry = (s.since_ms, false);
                due.push((s.job, SuspendAction::Told));
            }
            if !entry.1 && s.last_input_ms.is_some_and(|t| t > s.since_ms) {
                entry.1 = true;
                due.push((s.job, SuspendAction::WantBack));
            }
        }
        let gone: Vec<u64> = self
            .told
            .keys()
            .filter(|job| !sorted.iter().any(|s| s.job == **job))
            .copied()
            .collect();
        for job in gone {
            self.told.remove(&job);
            if running.contains(&job) {
                due.push((job, SuspendAction::Resumed));
            }
        }
        due.sort();
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule {
        busy_percent: 5.0,
        idle_after_ms: 60_000,
        grace_ms: 10_000,
    };

    fn seen(job: u64, util: Option<f64>, input: Option<i64>) -> Seen {
        Seen {
            job,
            started_ms: 0,
            gpu_util: util,
            last_input_ms: input,
            rule: RULE,
        }
    }

    fn actions(due: &[Due]) -> Vec<(u64, Action)> {
        due.iter().map(|d| (d.job, d.action)).collect()
    }

    #[test]
    fn an_idle_session_is_told_then_stopped_after_the_grace() {
        let mut w = Watch::default();
        assert!(w.step(30_000, &[seen(1, Some(0.0), None)]).is_empty());
        let due = w.step(60_000, &[seen(1, Some(2.0), None)]);
        assert_eq!(actions(&due), [(1, Action::Warn)]);
        assert_eq!(due[0].idle_ms, 60_000);
        assert!(w.step(69_999, &[seen(1, Some(0.0), None)]).is_empty());
        assert_eq!(
            actions(&w.step(70_000, &[seen(1, None, None)])),
            [(1, Action::Stop)]
        );
        assert!(
            w.step(80_000, &[seen(1, None, None)]).is_empty(),
            "stopped once"
        );
    }

    #[test]
    fn a_session_computing_in_silence_is_busy_and_typing_counts_too() {
        let mut w = Watch::default();
        for t in (0..600_000).step_by(10_000) {
            assert!(w.step(t, &[seen(1, Some(97.0), None)]).is_empty(), "at {t}");
        }
        // No GPU at all (a CPU session): typing alone keeps it.
        let mut w = Watch::default();
        assert!(w.step(59_000, &[seen(2, None, Some(50_000))]).is_empty());
        assert_eq!(
            actions(&w.step(110_000, &[seen(2, None, Some(50_000))])),
            [(2, Action::Warn)]
        );
    }

    #[test]
    fn activity_after_a_warning_takes_it_back_and_the_clock_starts_again() {
        let mut w = Watch::default();
        assert_eq!(
            actions(&w.step(60_000, &[seen(1, Some(0.0), None)])),
            [(1, Action::Warn)]
        );
        assert_eq!(
            actions(&w.step(65_000, &[seen(1, Some(0.0), Some(64_000))])),
            [(1, Action::Back)]
        );
        assert!(
            w.step(120_000, &[seen(1, Some(0.0), Some(64_000))])
                .is_empty()
        );
        assert_eq!(
            actions(&w.step(124_000, &[seen(1, Some(0.0), Some(64_000))])),
            [(1, Action::Warn)]
        );
        // Sessions are taken in job order, and one no longer seen is forgotten.
        let due = w.step(
            200_000,
            &[seen(9, Some(0.0), None), seen(3, Some(0.0), None)],
        );
        assert_eq!(actions(&due), [(3, Action::Warn), (9, Action::Warn)]);
        assert!(w.step(300_000, &[]).is_empty());
        assert!(w.busy.is_empty() && w.told.is_empty());
    }

    #[test]
    fn a_suspended_session_is_told_once_wanted_back_on_input_and_told_when_resumed() {
        let mut w = SuspendWatch::default();
        let quiet = SeenSuspended {
            job: 4,
            since_ms: 1_000,
            last_input_ms: Some(900),
        };
        assert_eq!(w.step(&[quiet], &[4]), [(4, SuspendAction::Told)]);
        assert!(w.step(&[quiet], &[4]).is_empty());
        let back = SeenSuspended {
            last_input_ms: Some(5_000),
            ..quiet
        };
        assert_eq!(w.step(&[back], &[4]), [(4, SuspendAction::WantBack)]);
        assert!(w.step(&[back], &[4]).is_empty(), "asked once");
        assert_eq!(w.step(&[], &[4]), [(4, SuspendAction::Resumed)]);
        // Suspended again, then ended while suspended: nothing to say at its end.
        let again = SeenSuspended {
            since_ms: 9_000,
            ..back
        };
        assert_eq!(w.step(&[again], &[4]), [(4, SuspendAction::Told)]);
        assert!(w.step(&[], &[]).is_empty());
    }
}
