//! `submit --test-only` (sbatch's `--test-only`): where and when the job would start, asked of
//! the controller, which queues nothing.

use crate::api::SubmitRequest;
use crate::api::test_only::WouldStart;
use crate::client::Client;

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
