//! Delivery: alerts that fired or resolved, and zombie ladder steps, become notices posted to
//! `[alerts] webhook` in its bot's shape (and logged either way); a zombie's last step cancels
//! it through the engine, as the admins would (so does the slice backstop, in [`super::slices`]).

use super::MonitorService;
use crate::engine::request::Request;
use crate::identity::Caller;
use labpool_monitor::alerts::Change;
use labpool_monitor::webhook::{Notice, body};
use labpool_monitor::zombie::{Kind, Step};
use serde_json::json;
use tokio::sync::oneshot;

/// Posts a notice to the webhook, or logs why it could not be.
pub async fn post(service: &MonitorService, notice: Notice) {
    tracing::warn!(kind = %notice.kind, user = notice.user.as_deref().unwrap_or("-"), "{}: {}", notice.title, notice.text);
    let Some(url) = &service.config.alerts.webhook else {
        return;
    };
    let b = body(service.config.alerts.webhook_format, &notice);
    if let Err(e) = crate::webhook::post(url, &b).await {
        tracing::warn!("could not post {:?}: {e:#}", notice.title);
    }
}

/// Each alert that fired or resolved.
pub async fn alerts(service: &MonitorService, changes: Vec<Change>) {
    for c in changes {
        let (status, a) = match c {
            Change::Fired(a) => ("firing", a),
            Change::Resolved(a) => ("resolved", a),
        };
        let notice = Notice {
            kind: "alert".to_string(),
            title: format!(
                "[{}] {} {} ({})",
                status.to_uppercase(),
                a.rule,
                a.subject,
                a.severity.as_str()
            ),
            text: a.text.clone(),
            user: a.user.clone(),
            fields: json!({
                "status": status,
                "rule": a.rule,
                "subject": a.subject,
                "severity": a.severity,
                "value": a.value,
                "since": crate::clock::rfc3339(a.since_ms),
            }),
        };
        mail_admins(service, &notice).await;
        post(service, notice).await;
    }
}

/// Mails an alert or a zombie notice to `[alerts] mail_to`, through `[mail] smtp`.
pub async fn mail_admins(service: &MonitorService, notice: &Notice) {
    let (Some(relay), to) = (&service.config.mail.smtp, &service.config.alerts.mail_to) else {
        return;
    };
    for addr in to {
        let body = format!("{}\n\n{}", notice.title, notice.text);
        let from = service.config.mail.from.as_deref();
        if let Err(e) = super::mail::send_mail(relay, from, addr, &notice.title, &body).await {
            tracing::warn!("could not mail {addr} through {relay}: {e:#}");
        }
    }
}

/// Each zombie ladder step due.
pub async fn zombies(service: &MonitorService, due: Vec<(u64, Kind, Step)>) {
    let rules = service.config.zombies.rules();
    for (job, kind, step) in due {
        let user = service.lock().running.get(&job).map(|r| r.user.clone());
        let why = kind.describe(&rules);
        let (title, text, to_user) = match step {
            Step::TellMember => (
                format!("[ZOMBIE] job {job} holds GPUs it does not use"),
                format!(
                    "Your job {job} {why}. Others are waiting for GPUs: if it is stuck or done, cancel it with `labpool cancel {job}`."
                ),
                user.clone(),
            ),
            Step::TellAdmins => (
                format!(
                    "[ZOMBIE] job {job} of {} still idle",
                    user.as_deref().unwrap_or("?")
                ),
                format!(
                    "Job {job} {why}; its member was told and it still runs. `labpool cancel {job}` frees its GPUs."
                ),
                None,
            ),
            Step::Cancel => (
                format!("[ZOMBIE] job {job} cancelled"),
                format!(
                    "Job {job} {why}; it was cancelled by the zombie rule ([zombies] cancel_after)."
                ),
                user.clone(),
            ),
        };
        let notice = Notice {
            kind: "zombie".to_string(),
            title,
            text,
            user: to_user,
            fields: json!({ "job": job, "zombie": kind, "step": step, "owner": user }),
        };
        if step != Step::TellMember {
            mail_admins(service, &notice).await;
        }
        post(service, notice).await;
        if step == Step::Cancel {
            cancel(service, job, "the zombie rule").await;
        }
    }
}

/// Cancels `job` as an admin would, for `rule` (named in the log when the engine is gone).
pub(crate) async fn cancel(service: &MonitorService, job: u64, rule: &str) {
    let caller = Caller {
        uid: 0,
        gid: 0,
        user: "labpool".to_string(),
        home: "/".into(),
        shell: "/bin/sh".into(),
        admin: true,
    };
    let (tx, rx) = oneshot::channel();
    let sent = service
        .engine
        .send(Request::Cancel {
            ids: vec![job.to_string()],
            caller,
            reply: tx,
        })
        .await;
    if sent.is_err() || rx.await.is_err() {
        tracing::warn!(
            job,
            "{rule} could not cancel job {job}: the engine is stopping"
        );
    }
}
