//! `submit --wait` (sbatch's `--wait`): queue the jobs, then wait for them and exit as they
//! did.

use crate::api::{JobView, Submitted};
use crate::client::Client;
use crate::controller::http::JobDetail;
use labpool_scheduler::JobState;
use std::time::Duration;

/// How often `--wait` asks, at most.
const WAIT_POLL: Duration = Duration::from_secs(2);

/// `--wait`: waits until every job of the submit has ended. The exit code is the highest any
/// of them exited with, as sbatch's; a job that ended without one (cancelled, timed out, its
/// node lost) counts as 1.
pub async fn wait(client: &Client, submitted: &Submitted) -> anyhow::Result<i32> {
    let mut worst = 0;
    for id in &submitted.job_ids {
        let mut every = Duration::from_millis(100);
        let job: JobView = loop {
            let d: JobDetail = client.get(&format!("/v1/jobs/{id}")).await?;
            if !matches!(
                d.job.state,
                JobState::Pending | JobState::Staging | JobState::Running
            ) {
                break d.job;
            }
            tokio::time::sleep(every).await;
            every = (every * 2).min(WAIT_POLL);
        };
        let code = match (job.state, job.exit_code) {
            (JobState::Completed, _) => 0,
            (_, Some(c)) if c != 0 => c,
            _ => 1,
        };
        if code != 0 {
            eprintln!("labpool: job {id} ended {} (exit code {code})", job.state);
        }
        worst = worst.max(code);
    }
    Ok(worst)
}
