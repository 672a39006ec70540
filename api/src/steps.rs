//! Job steps: each `srun` inside a job is one, recorded by `srun` in the job's own corner of
//! its attempt directory (a line when it starts, with `end_ms` 0, and one when it ends), read
//! by the agent while the attempt runs (every [`STEP_POLL`], when the file changed) and when it
//! ends, and kept by the controller beside the job (`labpool show` and `sacct` list them, a
//! running one as RUNNING, as Slurm's accounting does).

use serde::{Deserialize, Serialize};

/// One step as `srun` recorded it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepRecord {
    /// Step id, from 0 in the order the steps started.
    pub step: u32,
    /// What it ran: the command's first words.
    pub name: String,
    /// Tasks it started.
    pub tasks: u32,
    /// Nodes it ran on.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// When it started and ended, ms since the epoch.
    pub start_ms: i64,
    /// End.
    pub end_ms: i64,
    /// The highest exit code of its tasks (0 when all succeeded).
    pub exit_code: i32,
    /// The signal that ended a task, if one did.
    #[serde(default)]
    pub signal: Option<i32>,
}

/// A step as `show` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepView {
    /// The attempt it belongs to.
    pub attempt: u32,
    /// The step as recorded.
    #[serde(flatten)]
    pub step: StepRecord,
}

impl StepRecord {
    /// Started and not ended yet (its end is recorded as 0).
    pub fn is_running(&self) -> bool {
        self.end_ms == 0
    }

    /// Seconds it ran, or has run by `now_ms` while it runs.
    pub fn elapsed_s(&self, now_ms: i64) -> u64 {
        let end = if self.is_running() {
            now_ms
        } else {
            self.end_ms
        };
        ((end - self.start_ms).max(0) / 1000) as u64
    }

    /// Its state in Slurm's words: RUNNING; CANCELLED when it was killed with its job (a
    /// signal, no exit code of its own); FAILED on a nonzero exit; else COMPLETED.
    pub fn state(&self) -> &'static str {
        if self.is_running() {
            "RUNNING"
        } else if self.signal.is_some() && self.exit_code == 0 {
            "CANCELLED"
        } else if self.exit_code != 0 {
            "FAILED"
        } else {
            "COMPLETED"
        }
    }
}

/// Steps kept per job attempt at most; a job that runs more keeps the first ones.
pub const MAX_STEPS: usize = 1000;

/// How often an agent looks for new steps of a running attempt.
pub const STEP_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads a steps file (one JSON record a line), skipping lines that do not parse (the job's
/// user writes the file). A step's later line replaces its earlier one (its end replaces its
/// start); at most [`MAX_STEPS`] steps are kept, in step order.
pub fn read_steps(text: &str) -> Vec<StepRecord> {
    let mut steps: std::collections::BTreeMap<u32, StepRecord> = Default::default();
    for record in text
        .lines()
        .filter_map(|l| serde_json::from_str::<StepRecord>(l).ok())
    {
        if steps.len() < MAX_STEPS || steps.contains_key(&record.step) {
            steps.insert(record.step, record);
        }
    }
    steps.into_values().collect()
}

/// Steps still running when their attempt ended were killed with it: they end then, by
/// SIGKILL, as Slurm records the steps of a job that ended under them.
pub fn close_running(steps: &mut [StepRecord], end_ms: i64) {
    for s in steps.iter_mut().filter(|s| s.is_running()) {
        s.end_ms = end_ms.max(s.start_ms);
        s.signal = Some(9);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_end_replaces_its_start_and_running_ones_close_with_the_attempt() {
        let line = |step: u32, end_ms: i64, exit_code: i32| {
            serde_json::to_string(&StepRecord {
                step,
                name: "python train.py".into(),
                tasks: 2,
                nodes: vec!["n1".into()],
                start_ms: 1000,
                end_ms,
                exit_code,
                signal: None,
            })
            .unwrap()
        };
        let text = [
            line(0, 0, 0),
            line(1, 0, 0),
            "not json".to_string(),
            line(0, 5000, 3),
        ]
        .join("\n");
        let mut steps = read_steps(&text);
        assert_eq!(steps.len(), 2);
        assert_eq!((steps[0].end_ms, steps[0].exit_code), (5000, 3));
        assert!(!steps[0].is_running() && steps[1].is_running());
        close_running(&mut steps, 9000);
        assert_eq!((steps[1].end_ms, steps[1].signal), (9000, Some(9)));
        assert_eq!(steps[0].signal, None, "an ended step keeps its own end");
    }
}
