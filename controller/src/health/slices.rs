//! The slice backstop on the controller: each tick, every running sliced job is measured from
//! its node's latest sample (its processes' memory on its card) against its slice, and the
//! watch's warnings and kills are delivered: a notice to the member, a line in the job's event
//! log, and for a kill, the cancel the admins would send.

use super::{Inner, MonitorService};
use labpool_monitor::slice_watch::{Action, Measured};
use labpool_monitor::webhook::Notice;
use labpool_scheduler::JobState;
use labpool_scheduler::slice::slice_memory_mib;
use serde_json::json;

/// Every running sliced job, as its node's latest sample shows it.
pub(crate) fn measured(inner: &Inner) -> Vec<Measured> {
    let mut out = Vec::new();
    for row in inner.jobs.iter().filter(|j| j.state == JobState::Running) {
        let (Some(slice), Some(node), Some(gpu)) = (
            row.spec.resources.slice,
            row.node.as_ref(),
            row.gpus.first(),
        ) else {
            continue;
        };
        let Some(card) = inner
            .nodes
            .iter()
            .find(|n| &n.name == node)
            .and_then(|n| n.gpus.iter().find(|g| g.index == *gpu))
        else {
            continue;
        };
        let slice_mib = slice_memory_mib(slice, card.memory_mib, card.share);
        let Some((sample, _)) = inner.samples.get(node) else {
            continue;
        };
        let Some(on) = sample.gpus.iter().find(|g| g.index == *gpu) else {
            continue;
        };
        let mine = on.processes.iter().filter(|p| p.job == Some(row.id));
        let (held_mib, processes) = mine.fold((0, 0), |(m, n), p| (m + p.used_mib, n + 1));
        if slice_mib > 0 && processes > 0 {
            out.push(Measured {
                job: row.id,
                held_mib,
                processes,
                slice_mib,
            });
        }
    }
    out
}

/// Delivers what the watch decided.
pub(crate) async fn deliver(service: &MonitorService, due: Vec<(Measured, Action)>) {
    let grace = labpool_units::format_duration(service.config.jobs.slice_grace);
    for (m, action) in due {
        let job = m.job;
        let user = service.lock().running.get(&job).map(|r| r.user.clone());
        let why = m.describe();
        let (title, text, event) = match action {
            Action::Warn => (
                format!("[SLICE] job {job} is over its GPU slice"),
                format!(
                    "Your job {job}: {why}. It is killed if it stays over its slice for {grace}; the other jobs on the card need their memory."
                ),
                "SLICE_EXCEEDED",
            ),
            Action::Kill => (
                format!("[SLICE] job {job} killed: over its GPU slice"),
                format!(
                    "Job {job} was killed: {why}, for longer than {grace}. Ask for a larger slice or a whole GPU (--gres=gpu:TYPE:1)."
                ),
                "SLICE_KILLED",
            ),
        };
        let now = service.clock.now_ms();
        if let Err(e) = service.db.note_job_event(job, now, event, &why).await {
            tracing::warn!(job, "could not record the slice backstop's {event}: {e}");
        }
        let notice = Notice {
            kind: "slice".to_string(),
            title,
            text,
            user: user.clone(),
            fields: json!({ "job": job, "action": format!("{action:?}").to_lowercase(), "held_mib": m.held_mib, "slice_mib": m.slice_mib, "owner": user }),
        };
        if action == Action::Kill {
            super::deliver::mail_admins(service, &notice).await;
        }
        super::deliver::post(service, notice).await;
        if action == Action::Kill {
            super::deliver::cancel(service, job, "the slice backstop").await;
        }
    }
}
