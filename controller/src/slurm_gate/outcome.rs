//! How an attempt ended, read from the Slurm job that ran it.

use crate::slurm_gate::queue::SlurmJob;
use labpool_lifecycle::Outcome;
use labpool_scheduler::JobState;

/// The outcome of a finished Slurm job, in labpool's states. `exit_code` is the batch script's
/// wait status (exit code × 256 + signal). A job Slurm gives no end time ends at `now_ms`.
pub fn outcome_of(j: &SlurmJob, now_ms: i64) -> Outcome {
    let code = (j.exit_code >> 8) as i32;
    let signal = (j.exit_code & 0x7f) as i32;
    let state = match j.job_state.as_str() {
        "COMPLETED" => JobState::Completed,
        "CANCELLED" => JobState::Cancelled,
        "TIMEOUT" => JobState::Timeout,
        "NODE_FAIL" => JobState::NodeFail,
        "OUT_OF_MEMORY" => JobState::OutOfMemory,
        "DEADLINE" => JobState::Deadline,
        _ => JobState::Failed,
    };
    let reason = match j.job_state.as_str() {
        "COMPLETED" | "FAILED" => None,
        "CANCELLED" => Some("cancelled in Slurm".to_string()),
        "NODE_FAIL" => Some("Slurm reports its node failed (NODE_FAIL)".to_string()),
        s => Some(format!("Slurm ended it {s}")),
    };
    Outcome {
        state,
        exit_code: (signal == 0 && state != JobState::Cancelled).then_some(code),
        signal: (signal != 0).then_some(signal),
        end_time_ms: if j.end_time > 0 {
            j.end_time * 1000
        } else {
            now_ms
        },
        reason,
    }
}
