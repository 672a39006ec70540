//! Suspended sessions on the monitor: each tick, the sessions whose GPU state sits in host
//! memory are seen with their member's latest input ([`SuspendWatch`] decides), and what is due
//! is delivered: the words their terminal shows, and, when their member is back, the engine is
//! told that they want their GPUs.

use super::{Inner, MonitorService};
use crate::engine::request::Request;
use labpool_lifecycle::gpu_list;
use labpool_monitor::idle_sessions::{SeenSuspended, SuspendAction};
use labpool_scheduler::JobState;

/// The suspended sessions, and every running session's id.
pub(crate) fn seen(inner: &Inner) -> (Vec<SeenSuspended>, Vec<u64>) {
    let mut suspended = Vec::new();
    let mut running = Vec::new();
    for row in inner
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Running && j.request.interactive)
    {
        running.push(row.id);
        if let Some(since) = row.pause.as_ref().and_then(|p| p.since) {
            suspended.push(SeenSuspended {
                job: row.id,
                since_ms: since,
                last_input_ms: inner.inputs.get(&row.id).copied(),
            });
        }
    }
    (suspended, running)
}

/// What the watch decided at `now`. A resumed session's idle clock starts again now, not at
/// the input that asked for its GPU, however long the GPU took to come free: this runs before
/// the idle watch's step.
pub(crate) fn step(inner: &mut Inner, now: i64) -> Vec<(u64, SuspendAction)> {
    let (suspended, running) = seen(inner);
    let due = inner.suspend_watch.step(&suspended, &running);
    for (job, action) in &due {
        if *action == SuspendAction::Resumed {
            inner.inputs.insert(*job, now);
        }
    }
    due
}

/// Delivers it: words for each terminal, and the members who came back to the engine.
pub(crate) async fn deliver(service: &MonitorService, due: Vec<(u64, SuspendAction)>) {
    for (job, action) in due {
        let row = service.lock().jobs.iter().find(|j| j.id == job).cloned();
        let Some(row) = row else { continue };
        let gpus = row
            .pause
            .as_ref()
            .map(|p| gpu_list(&p.gpus))
            .unwrap_or_default();
        let words = match action {
            SuspendAction::Told => {
                let subject = format!("[IDLE] session {job} suspended");
                let body = format!(
                    "Your session {job} was idle. Its GPU state was saved to host memory and GPU {gpus} went to others who wait. Type in it (`labpool attach {job}`) or run a notebook cell to get it back: it is restored as soon as GPU {gpus} is free."
                );
                super::mail::deliver(service, &row, "IDLE", &subject, &body).await;
                format!(
                    "labpool: this session is suspended: its GPU state is saved in host memory and GPU {gpus} went back to the pool. Type anything to get it back; it is restored as soon as GPU {gpus} is free"
                )
            }
            SuspendAction::WantBack => {
                if service
                    .engine
                    .send(Request::WantBack { job })
                    .await
                    .is_err()
                {
                    continue;
                }
                format!(
                    "labpool: welcome back: your session is restored as soon as GPU {gpus} is free (its CUDA calls wait until then)"
                )
            }
            SuspendAction::Resumed => {
                "labpool: this session holds its GPU again and its GPU state is restored"
                    .to_string()
            }
        };
        super::idle::tell(service, job, &words);
    }
}
