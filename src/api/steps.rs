//! Job steps: each `srun` inside a job is one, recorded by `srun` in the job's own corner of
//! its attempt directory, read by the agent when the attempt ends, and kept by the controller
//! beside the job (`labpool show` lists them).

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

/// Steps kept per job attempt at most; a job that runs more keeps the first ones.
pub const MAX_STEPS: usize = 1000;

/// Reads a steps file (one JSON record a line), skipping lines that do not parse (the job's
/// user writes the file) and keeping at most [`MAX_STEPS`].
pub fn read_steps(text: &str) -> Vec<StepRecord> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .take(MAX_STEPS)
        .collect()
}
