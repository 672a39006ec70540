//! The backstop behind GPU slices. The slice library holds a sliced job's allocations to its
//! slice from inside its processes; a process that escapes it (no `LD_PRELOAD`, a static
//! driver) is caught here, from NVML's per-process memory as the agents sample it. A job whose
//! processes on its card hold more than its slice, beyond an allowance for each process's CUDA
//! context (which no allocation call books), is warned at once and killed when it is still over
//! after a grace.
//!
//! Deterministic: [`Watch::step`] takes `now` and what was measured, and keeps only which jobs
//! were found over and since when.

use std::collections::{BTreeMap, BTreeSet};

/// GPU memory, MiB, that a process may hold on a card beyond what it allocated: its CUDA
/// context, which the driver creates and no allocation call books (a few hundred MiB).
pub const CONTEXT_MIB: u64 = 512;

/// A sliced job as measured: what its processes hold on its card, and its slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// The job.
    pub job: u64,
    /// What its processes hold on its card, MiB (NVML).
    pub held_mib: u64,
    /// How many of its processes NVML sees on its card.
    pub processes: u32,
    /// Its slice's memory, MiB.
    pub slice_mib: u64,
}

impl Measured {
    /// The most its processes may hold before the backstop acts: the slice, and a context
    /// for each process.
    pub fn allowed_mib(&self) -> u64 {
        self.slice_mib + CONTEXT_MIB * u64::from(self.processes.max(1))
    }

    /// True when it holds more than it is allowed.
    pub fn over(&self) -> bool {
        self.held_mib > self.allowed_mib()
    }

    /// A sentence for the member and the job's record.
    pub fn describe(&self) -> String {
        format!(
            "its processes hold {} MiB of GPU memory on its card, over its slice of {} MiB (with {} MiB for each of its {} processes' CUDA contexts, {} MiB)",
            self.held_mib,
            self.slice_mib,
            CONTEXT_MIB,
            self.processes.max(1),
            self.allowed_mib()
        )
    }
}

/// What the backstop does to a job now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Tell its member: it is over its slice and is killed if it stays so.
    Warn,
    /// Kill it: still over its slice after the grace.
    Kill,
}

/// Which sliced jobs were found over their slice, since when, and what they were told.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    since: BTreeMap<u64, i64>,
    done: BTreeMap<u64, BTreeSet<Action>>,
}

impl Watch {
    /// The actions due at `now_ms` for what was `measured`, in job order. A job no longer over
    /// its slice (or no longer measured) is forgotten, so a relapse is warned again.
    pub fn step(
        &mut self,
        now_ms: i64,
        measured: &[Measured],
        grace_ms: i64,
    ) -> Vec<(Measured, Action)> {
        let over: BTreeMap<u64, Measured> = measured
            .iter()
            .filter(|m| m.over())
            .map(|m| (m.job, *m))
            .collect();
        self.since.retain(|job, _| over.contains_key(job));
        self.done.retain(|job, _| over.contains_key(job));
        let mut due = Vec::new();
        for (job, m) in over {
            let since = *self.since.entry(job).or_insert(now_ms);
            let done = self.done.entry(job).or_default();
            if done.insert(Action::Warn) {
                due.push((m, Action::Warn));
            }
            if now_ms >= since + grace_ms && done.insert(Action::Kill) {
                due.push((m, Action::Kill));
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(job: u64, held_mib: u64) -> Measured {
        Measured {
            job,
            held_mib,
            processes: 1,
            slice_mib: 6144,
        }
    }

    #[test]
    fn a_job_over_its_slice_is_warned_then_killed_after_the_grace() {
        let mut w = Watch::default();
        // Within the slice and its context: nothing.
        assert!(w.step(0, &[measured(1, 6144 + 512)], 30_000).is_empty());
        let over = measured(1, 9000);
        assert_eq!(w.step(1_000, &[over], 30_000), [(over, Action::Warn)]);
        assert!(w.step(30_999, &[over], 30_000).is_empty());
        assert_eq!(w.step(31_000, &[over], 30_000), [(over, Action::Kill)]);
        assert!(w.step(40_000, &[over], 30_000).is_empty());
    }

    #[test]
    fn a_job_back_under_its_slice_starts_again_from_a_warning() {
        let mut w = Watch::default();
        let over = measured(2, 9000);
        assert_eq!(w.step(0, &[over], 10_000), [(over, Action::Warn)]);
        assert!(w.step(5_000, &[measured(2, 100)], 10_000).is_empty());
        assert_eq!(w.step(12_000, &[over], 10_000), [(over, Action::Warn)]);
        assert!(w.step(21_999, &[over], 10_000).is_empty());
        assert_eq!(w.step(22_000, &[over], 10_000), [(over, Action::Kill)]);
        assert!(over.describe().contains("9000 MiB") && over.describe().contains("6144 MiB"));
    }
}
