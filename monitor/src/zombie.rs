//! Zombie jobs: jobs that hold GPUs and do not use them. Four kinds, each found from the job's
//! usage summary, and one action ladder for all: tell the member, then the admins, then cancel,
//! each after its own delay from when the job was found. The steps follow from the persisted
//! "since" times, so a controller restart does not restart the clock; a step already delivered
//! is remembered in memory only, so a restart may repeat a notice, never skip one.

use crate::usage::JobUsage;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What kind of zombie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Utilisation below the low mark for the low time (the seed's 5% for 7 days).
    LowUtil,
    /// GPUs held with no process on them.
    NoProcess,
    /// GPU memory still held after the job's processes are gone.
    MemoryLeak,
    /// A multi-node job with a node where its processes are gone while others still run.
    RankGone,
}

impl Kind {
    /// A sentence for the member.
    pub fn describe(self, rules: &Rules) -> String {
        match self {
            Kind::LowUtil => format!(
                "its GPUs stayed below {}% utilisation for {}",
                rules.low_percent,
                human_ms(rules.low_for_ms)
            ),
            Kind::NoProcess => format!(
                "it has held its GPUs with no process on them for {}",
                human_ms(rules.no_process_for_ms)
            ),
            Kind::MemoryLeak => format!(
                "its GPUs still hold memory though its processes are gone, for {}",
                human_ms(rules.leak_for_ms)
            ),
            Kind::RankGone => format!(
                "one of its nodes has had none of its processes for {} while the others run",
                human_ms(rules.no_process_for_ms)
            ),
        }
    }

    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::LowUtil => "low_util",
            Kind::NoProcess => "no_process",
            Kind::MemoryLeak => "memory_leak",
            Kind::RankGone => "rank_gone",
        }
    }
}

/// `[zombies]`, in ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    /// Utilisation below this is low, percent.
    pub low_percent: f64,
    /// How long low utilisation makes a zombie.
    pub low_for_ms: i64,
    /// How long GPUs may be held with no process.
    pub no_process_for_ms: i64,
    /// How long memory may stay held with no process.
    pub leak_for_ms: i64,
    /// After being found, when the admins are told (None: never).
    pub tell_admins_after_ms: Option<i64>,
    /// After being found, when the job is cancelled (None: never, the default).
    pub cancel_after_ms: Option<i64>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            low_percent: 5.0,
            low_for_ms: 7 * 86_400_000,
            no_process_for_ms: 3_600_000,
            leak_for_ms: 600_000,
            tell_admins_after_ms: Some(86_400_000),
            cancel_after_ms: None,
        }
    }
}

/// What a job's summary says at `now_ms`: the first kind that holds, and since when it has
/// counted as a zombie (the condition's start plus its "for"). `rank_gone_since` is when one of
/// a multi-node job's nodes lost its processes while another kept them, if so.
pub fn find(
    usage: &JobUsage,
    rank_gone_since: Option<i64>,
    now_ms: i64,
    rules: &Rules,
) -> Option<(Kind, i64)> {
    let held = |since: Option<i64>, for_ms: i64| since.map(|s| s + for_ms).filter(|t| *t <= now_ms);
    held(usage.leak_since_ms, rules.leak_for_ms)
        .map(|t| (Kind::MemoryLeak, t))
        .or_else(|| {
            held(usage.idle_since_ms, rules.no_process_for_ms).map(|t| (Kind::NoProcess, t))
        })
        .or_else(|| held(rank_gone_since, rules.no_process_for_ms).map(|t| (Kind::RankGone, t)))
        .or_else(|| held(usage.low_since_ms, rules.low_for_ms).map(|t| (Kind::LowUtil, t)))
}

/// One rung of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Tell the job's member.
    TellMember,
    /// Tell the admins.
    TellAdmins,
    /// Cancel the job.
    Cancel,
}

/// The ladder's memory: which steps each job has had.
#[derive(Debug, Clone, Default)]
pub struct Ladder {
    done: BTreeMap<u64, BTreeSet<Step>>,
}

impl Ladder {
    /// The steps due now for each zombie (`found`: job to kind and since when), in job order.
    /// Jobs no longer found are forgotten, so a job that recovers and relapses is told again.
    pub fn step(
        &mut self,
        now_ms: i64,
        found: &BTreeMap<u64, (Kind, i64)>,
        rules: &Rules,
    ) -> Vec<(u64, Kind, Step)> {
        self.done.retain(|job, _| found.contains_key(job));
        let mut due = Vec::new();
        for (&job, &(kind, since)) in found {
            let done = self.done.entry(job).or_default();
            let ladder = [
                (Step::TellMember, Some(0)),
                (Step::TellAdmins, rules.tell_admins_after_ms),
                (Step::Cancel, rules.cancel_after_ms),
            ];
            for (step, after) in ladder {
                if let Some(after) = after
                    && now_ms >= since + after
                    && done.insert(step)
                {
                    due.push((job, kind, step));
                }
            }
        }
        due
    }
}

/// A rule's duration as labpool prints durations (`7d`, `1h`, `1m 30s`).
fn human_ms(ms: i64) -> String {
    labpool_units::format_duration(std::time::Duration::from_millis(ms.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_low_job_climbs_the_ladder_on_time_and_is_forgotten_when_it_recovers() {
        let rules = Rules {
            low_for_ms: 10_000,
            tell_admins_after_ms: Some(5_000),
            cancel_after_ms: Some(20_000),
            ..Rules::default()
        };
        let usage = JobUsage {
            low_since_ms: Some(1_000),
            ..JobUsage::default()
        };
        assert_eq!(find(&usage, None, 10_999, &rules), None);
        let found = find(&usage, None, 11_000, &rules).unwrap();
        assert_eq!(found, (Kind::LowUtil, 11_000));
        let mut ladder = Ladder::default();
        let map = BTreeMap::from([(7, found)]);
        assert_eq!(
            ladder.step(11_000, &map, &rules),
            vec![(7, Kind::LowUtil, Step::TellMember)]
        );
        assert!(ladder.step(15_999, &map, &rules).is_empty());
        assert_eq!(
            ladder.step(16_000, &map, &rules),
            vec![(7, Kind::LowUtil, Step::TellAdmins)]
        );
        assert_eq!(
            ladder.step(31_000, &map, &rules),
            vec![(7, Kind::LowUtil, Step::Cancel)]
        );
        assert!(ladder.step(40_000, &map, &rules).is_empty());
        assert!(ladder.step(41_000, &BTreeMap::new(), &rules).is_empty());
        assert_eq!(
            ladder.step(42_000, &map, &rules).len(),
            3,
            "a relapse starts over"
        );
    }

    #[test]
    fn a_leak_is_named_before_an_idle_card() {
        let rules = Rules::default();
        let usage = JobUsage {
            idle_since_ms: Some(0),
            leak_since_ms: Some(0),
            ..JobUsage::default()
        };
        assert_eq!(
            find(&usage, None, 3_600_000, &rules).unwrap().0,
            Kind::MemoryLeak
        );
        assert_eq!(human_ms(rules.low_for_ms), "7d");
    }
}
