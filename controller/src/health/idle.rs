//! Idle sessions on the controller: each tick, every running interactive job is seen from its
//! node's latest GPU sample and the input its host last reported
//! ([`labpool_monitor::idle_sessions`] decides), and what is due is delivered: a line in the
//! job's event log (the dashboard's job page shows it), a notice to the member (webhook and
//! mail), the words its terminal shows at the host's next report, and for a stop, the cancel the
//! admins would send.

use super::{Inner, MonitorService};
use labpool_monitor::idle_sessions::{Action, Due, Seen};
use labpool_scheduler::JobState;
use labpool_units::format_duration;
use std::time::Duration;

/// Every running session whose host reports in, as the latest samples and its reports show it.
/// A session whose host never reached the controller (over the Slurm executor, say) is left to
/// its host's own rule: no input for `[jobs] interactive_idle`.
pub(crate) fn seen(inner: &Inner, config: &crate::settings::Config, now: i64) -> Vec<Seen> {
    let fresh_ms = (3 * config.metrics.sample_interval.as_millis() as i64).max(15_000);
    let mut out = Vec::new();
    for row in inner
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Running && j.request.interactive)
        // A suspended session holds no GPU; its return is watched apart (`super::suspended`).
        .filter(|j| !j.is_suspended())
    {
        let Some(last_input) = inner.inputs.get(&row.id) else {
            continue;
        };
        let gpu_util = row.node.as_ref().and_then(|node| {
            let (sample, at) = inner.samples.get(node)?;
            if now - at > fresh_ms || row.gpus.is_empty() {
                return None;
            }
            sample
                .gpus
                .iter()
                .filter(|g| row.gpus.contains(&g.index))
                .filter_map(|g| g.util)
                .max()
                .map(f64::from)
        });
        out.push(Seen {
            job: row.id,
            started_ms: row.start_time.unwrap_or(now),
            gpu_util,
            last_input_ms: Some(*last_input),
            rule: config.idle_rule(&row.spec.partition),
        });
    }
    out
}

/// Words for `job`'s terminal, after any its host has not fetched yet.
pub(crate) fn tell(service: &MonitorService, job: u64, words: &str) {
    service
        .lock()
        .idle_notices
        .entry(job)
        .or_default()
        .push_str(&format!("\r\n{words}\r\n"));
}

/// A span in whole seconds ("1h", "2s"): sample times would add noise.
fn ms(d: i64) -> String {
    format_duration(Duration::from_secs((d.max(0) / 1000) as u64))
}

/// What an idle session is, in words: "no input and its GPUs under 5% for 1h" (its rule's
/// span when it is told, what it had when it is stopped).
fn idle_words(d: &Due, gpus: bool) -> String {
    let span = match d.action {
        Action::Warn => d.rule.idle_after_ms,
        _ => d.idle_ms,
    };
    if gpus {
        format!(
            "no input and its GPUs under {}% for {}",
            d.rule.busy_percent,
            ms(span)
        )
    } else {
        format!("no input for {}", ms(span))
    }
}

/// Delivers what the watch decided.
pub(crate) async fn deliver(service: &MonitorService, due: Vec<Due>) {
    for d in due {
        let job = d.job;
        let row = service.lock().jobs.iter().find(|j| j.id == job).cloned();
        let Some(row) = row else { continue };
        let idle = idle_words(&d, !row.gpus.is_empty());
        let grace = ms(d.rule.grace_ms);
        if d.action == Action::Stop && suspend(service, &row, &idle).await {
            continue;
        }
        let (event, terminal, mail) = match d.action {
            Action::Warn => (
                "IDLE_WARNING",
                format!(
                    "labpool: this session has been idle ({idle}); it stops in {grace} and its GPUs go back to the pool, unless you type or its GPUs work"
                ),
                Some((
                    format!("[IDLE] session {job} stops in {grace}"),
                    format!(
                        "Your session {job} has been idle: {idle}. Others wait for GPUs: it is stopped in {grace} unless you type in it (`labpool attach {job}`) or its GPUs compute."
                    ),
                )),
            ),
            Action::Back => (
                "IDLE_CLEARED",
                "labpool: this session is busy again; it is no longer stopped".to_string(),
                None,
            ),
            Action::Stop => (
                "IDLE_STOPPED",
                format!(
                    "labpool: this session was idle ({idle}, told {grace} ago); it is stopped now and its GPUs go back to the pool"
                ),
                Some((
                    format!("[IDLE] session {job} stopped"),
                    format!(
                        "Your session {job} was stopped: {idle}, still idle {grace} after it was told. Start another with `labpool run --pty` when you need one."
                    ),
                )),
            ),
        };
        let now = service.clock.now_ms();
        if let Err(e) = service.db.note_job_event(job, now, event, &idle).await {
            tracing::warn!(job, "could not record the idle rule's {event}: {e}");
        }
        tell(service, job, &terminal);
        if let Some((subject, body)) = mail {
            super::mail::deliver(service, &row, "IDLE", &subject, &body).await;
        }
        if d.action == Action::Stop {
            // The terminal learns why from the job's events (the client reads them at the end).
            super::deliver::cancel(service, job, "the idle rule").await;
        }
    }
}

/// Asks the engine to suspend `row` rather than stop it; true when its node was told to. The
/// member is told once the node has done it ([`super::suspended`]); the engine stops the
/// session if the node fails to.
async fn suspend(service: &MonitorService, row: &crate::jobs::JobRow, idle: &str) -> bool {
    let job = row.id;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let asked = service
        .engine
        .send(crate::engine::request::Request::Suspend { job, reply: tx })
        .await;
    let gpus = match (asked, rx.await) {
        (Ok(()), Ok(Ok(gpus))) => labpool_lifecycle::gpu_list(&gpus),
        (Ok(()), Ok(Err(why))) => {
            tracing::debug!(job, "idle session stopped, not suspended: {why}");
            return false;
        }
        _ => return false,
    };
    let now = service.clock.now_ms();
    let detail =
        format!("{idle}; its node is saving its GPU state to host memory to give GPU {gpus} back");
    if let Err(e) = service
        .db
        .note_job_event(job, now, "IDLE_SUSPENDING", &detail)
        .await
    {
        tracing::warn!(job, "could not record the idle rule's suspend: {e}");
    }
    true
}
