//! The two submit modes that do more than queue: `--test-only` (where and when the job would
//! start, queueing nothing) and `--wait` (queue it, then wait for it and exit as it did).

use crate::api::test_only::WouldStart;
use crate::api::{JobView, SubmitRequest, Submitted};
use crate::client::Client;
use crate::controller::http::JobDetail;
use labpool_scheduler::JobState;
use std::time::Duration;

/// `--test-only`: prints sbatch's sentence (or JSON) and queues nothing.
pub async fn test_only(
    client: &Client,
    req: &SubmitRequest,
    json: bool,
    style: super::submit::Style,
) -> anyhow::Result<()> {
    let w: WouldStart = client.post("/v1/jobs/test", req).await?;
    if style == super::submit::Style::Sbatch && !json {
        // sbatch writes it on standard error.
        eprintln!("sbatch: {}", would_start_text(&w));
        return Ok(());
    }
    crate::render::print(json, &w, would_start_text);
    Ok(())
}

/// sbatch's sentence: `Job 7 to start at 2026-12-04T10:31:05 using 4 processors on nodes gn1
/// in partition normal`, or why no time can be told.
fn would_start_text(w: &WouldStart) -> String {
    let start = w
        .start_time
        .as_deref()
        .and_then(crate::clock::parse_ms)
        .map(crate::clock::short);
    match (start, &w.node) {
        (Some(t), Some(node)) => format!(
            "Job {} to start at {t} using {} processors on nodes {node} in partition {}",
            w.job_id, w.cpus, w.partition
        ),
        _ => format!(
            "Job {} would wait in partition {}: {}{}; no start time can be told yet",
            w.job_id,
            w.partition,
            w.reason.as_deref().unwrap_or("no estimate"),
            w.reason_detail
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ),
    }
}

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
