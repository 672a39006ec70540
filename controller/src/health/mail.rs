//! Job notifications: each tick reads the job events written since the last one and the running
//! jobs' clocks, asks `labpool_monitor::notify` what is due, and delivers it by e-mail (`[mail]
//! smtp`) and on the webhook, naming the member. At start the notifier begins after the newest
//! event, so a restart never repeats old notices; events while it was down are not told.

use super::MonitorService;
use crate::jobs::rows::JobRow;
use labpool_monitor::notify::{Event, for_event, time_warning};
use labpool_monitor::webhook::Notice;
use labpool_scheduler::{JobState, TimeLimit};
use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::json;
use std::collections::BTreeMap;

/// What the notifier remembers between ticks.
#[derive(Default)]
pub struct MailState {
    /// The last job event handled.
    pub last_event: Option<i64>,
    /// The highest time-limit mark sent per attempt.
    pub time_sent: BTreeMap<(u64, u32), u32>,
    /// Attempts warned of their memory limit.
    pub memory_sent: std::collections::BTreeSet<(u64, u32)>,
}

/// Most events handled in one tick.
const EVENTS_PER_TICK: i64 = 500;

/// One notifier tick.
pub async fn step(service: &MonitorService) -> anyhow::Result<()> {
    let last = service.lock().mail.last_event;
    let Some(after) = last else {
        let newest = service.db.last_job_event().await?;
        service.lock().mail.last_event = Some(newest);
        return Ok(());
    };
    let events = service.db.job_events_after(after, EVENTS_PER_TICK).await?;
    let mut jobs: BTreeMap<u64, Option<JobRow>> = BTreeMap::new();
    for (id, job, event, detail) in events {
        if let std::collections::btree_map::Entry::Vacant(slot) = jobs.entry(job) {
            slot.insert(service.db.job(job).await?);
        }
        service.lock().mail.last_event = Some(id);
        let Some(Some(row)) = jobs.get(&job) else {
            continue;
        };
        let e = Event {
            id,
            job,
            event,
            detail: detail.clone(),
        };
        for note in for_event(&e, &row.spec.name, &row.request.mail_types) {
            let mut body = format!(
                "{}\n\nJob {job} ({}) of {}: {detail}.\n`labpool show {job}` has its events and output files.",
                note.subject, row.spec.name, row.spec.user
            );
            // At its end, a one-GPU job is told which slice its memory would have fitted.
            if e.event == "end"
                && let Some(advice) = end_advice(service, row).await
            {
                body.push_str(&format!("\n\nA smaller slice: {advice}."));
            }
            deliver(service, row, note.kind.as_str(), &note.subject, &body).await;
        }
    }
    time_warnings(service).await;
    memory_warnings(service).await;
    Ok(())
}

/// The slice advice for an ended job (see [`crate::jobs::advice`]), from its own sampled peak.
async fn end_advice(service: &MonitorService, row: &JobRow) -> Option<String> {
    if row.spec.resources.gpus != 1 {
        return None;
    }
    let peak = service
        .db
        .gpu_usage(row.id, row.attempt)
        .await
        .ok()
        .flatten()
        .map(|u| u.mem_peak_mib);
    let nodes = service.lock().nodes.clone();
    let now = service.clock.now_ms();
    crate::jobs::advice::slice_advice(&service.db, &nodes, row, peak, now)
        .await
        .ok()
        .flatten()
}

/// Warnings before a memory-limit kill: a running attempt whose cgroup holds
/// `[mail] warn_memory_percent` of its `--mem`, summed over its nodes' last samples.
async fn memory_warnings(service: &MonitorService) {
    let mark = f64::from(service.config.mail.warn_memory_percent);
    if mark <= 0.0 {
        return;
    }
    let due: Vec<(JobRow, u64)> = {
        let mut inner = service.lock();
        let inner = &mut *inner;
        let mut used: BTreeMap<(u64, u32), u64> = BTreeMap::new();
        for (sample, _) in inner.samples.values() {
            for m in &sample.jobs_memory {
                *used.entry((m.job, m.attempt)).or_default() += m.bytes;
            }
        }
        let running: Vec<&JobRow> = inner
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .collect();
        inner.mail.memory_sent.retain(|(job, attempt)| {
            running
                .iter()
                .any(|j| j.id == *job && j.attempt == *attempt)
        });
        let mut due = Vec::new();
        for j in running {
            let limit = j.request.mem_mib.saturating_mul(1 << 20);
            let Some(bytes) = used.get(&(j.id, j.attempt)).copied() else {
                continue;
            };
            if limit > 0
                && bytes as f64 >= limit as f64 * mark / 100.0
                && inner.mail.memory_sent.insert((j.id, j.attempt))
            {
                due.push((j.clone(), bytes));
            }
        }
        due
    };
    for (j, bytes) in due {
        let limit = j.request.mem_mib.saturating_mul(1 << 20);
        let subject = format!(
            "labpool Job_id={} Name={} Reached {:.0}% of memory limit",
            j.id,
            j.spec.name,
            100.0 * bytes as f64 / limit as f64
        );
        let body = format!(
            "{subject}\n\nJob {} ({}) holds {} of its {} memory limit. Past the limit the kernel kills it (OUT_OF_MEMORY): free memory, or resubmit with a larger --mem.",
            j.id,
            j.spec.name,
            labpool_units::format_size(bytes),
            labpool_units::format_size(limit),
        );
        deliver(service, &j, "MEMORY", &subject, &body).await;
    }
}

/// Warnings before a time-limit kill, for the running jobs of the last tick.
async fn time_warnings(service: &MonitorService) {
    let now = service.clock.now_ms();
    let always = service.config.mail.warn_time_percent;
    let due: Vec<(JobRow, u32, i64, i64)> = {
        let mut inner = service.lock();
        let inner = &mut *inner;
        let running: Vec<&JobRow> = inner
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .collect();
        inner.mail.time_sent.retain(|(job, attempt), _| {
            running
                .iter()
                .any(|j| j.id == *job && j.attempt == *attempt)
        });
        let mut due = Vec::new();
        for j in running {
            let (Some(start), TimeLimit::Seconds(limit_s)) = (j.start_time, j.spec.time_limit)
            else {
                continue;
            };
            let (elapsed, limit) = (now - start, limit_s as i64 * 1000);
            let sent = inner.mail.time_sent.entry((j.id, j.attempt)).or_insert(0);
            if let Some(p) = time_warning(elapsed, limit, &j.request.mail_types, always, *sent) {
                *sent = p;
                due.push((j.clone(), p, elapsed, limit));
            }
        }
        due
    };
    for (j, percent, elapsed, limit) in due {
        let left = labpool_units::format_duration(std::time::Duration::from_millis(
            (limit - elapsed).max(0) as u64,
        ));
        let subject = format!(
            "labpool Job_id={} Name={} Reached {percent}% of time limit",
            j.id, j.spec.name
        );
        let body = format!(
            "{subject}\n\nJob {} ({}) has {left} left of its {} time limit. At the limit it is sent TERM, then KILL after the grace: save a checkpoint now.",
            j.id,
            j.spec.name,
            labpool_units::format_duration(std::time::Duration::from_millis(limit as u64)),
        );
        deliver(
            service,
            &j,
            &format!("TIME_LIMIT_{percent}"),
            &subject,
            &body,
        )
        .await;
    }
}

/// Sends one notice about `job`: to the webhook naming the member (or `--mail-user`), and by
/// e-mail where an address is known.
pub(crate) async fn deliver(
    service: &MonitorService,
    job: &JobRow,
    kind: &str,
    subject: &str,
    body: &str,
) {
    let who = job
        .request
        .mail_user
        .clone()
        .unwrap_or_else(|| job.spec.user.clone());
    let mail = &service.config.mail;
    let address = address_of(mail, &who);
    if let (Some(relay), Some(to)) = (&mail.smtp, &address)
        && let Err(e) = send_mail(relay, mail.from.as_deref(), to, subject, body).await
    {
        tracing::warn!(job = job.id, "could not mail {to} through {relay}: {e:#}");
    }
    super::deliver::post(
        service,
        Notice {
            kind: "job".to_string(),
            title: subject.to_string(),
            text: body.to_string(),
            user: Some(who.split('@').next().unwrap_or(&who).to_string()),
            fields: json!({ "job": job.id, "mail_type": kind, "owner": job.spec.user, "to": address }),
        },
    )
    .await;
}

/// The address `who` (an address, or a login name) is mailed at, when there is one.
fn address_of(mail: &crate::settings::MailConfig, who: &str) -> Option<String> {
    if who.contains('@') {
        Some(who.to_string())
    } else {
        mail.domain.as_ref().map(|d| format!("{who}@{d}"))
    }
}

/// What a job's `--mail-type` will not do, for warnings at submit: the moments labpool never
/// tells of, and why notices will not be e-mailed (no relay, or a login name with no domain to
/// be mailed at), saying where they go instead and which setting would mail them.
pub(crate) fn mail_warnings(
    config: &crate::settings::Config,
    req: &crate::api::SubmitRequest,
    user: &str,
) -> Vec<String> {
    use labpool_scheduler::options::MailType;
    let mut out = Vec::new();
    let never: Vec<&str> = req
        .mail_types
        .iter()
        .filter(|t| matches!(t, MailType::InvalidDepend | MailType::StageOut))
        .map(|t| t.as_str())
        .collect();
    if !never.is_empty() {
        out.push(format!(
            "--mail-type: {} {} never told here (labpool has no stage-out, and a job whose dependency can never be met just waits, with reason DependencyNeverSatisfied); the other types are",
            never.join(" and "),
            if never.len() == 1 { "is" } else { "are" }
        ));
    }
    if req.mail_types.contains(&MailType::ArrayTasks) {
        out.push(
            "--mail-type=ARRAY_TASKS changes nothing here: each task of an array is told of on its own already".to_string(),
        );
    }
    out.extend(unmailed(config, req, user));
    out
}

/// Why notices will not be e-mailed, when they will not.
fn unmailed(
    config: &crate::settings::Config,
    req: &crate::api::SubmitRequest,
    user: &str,
) -> Option<String> {
    if req.mail_types.is_empty() {
        return None;
    }
    let instead = if config.alerts.webhook.is_some() || config.alerts.webhook_file.is_some() {
        "they are posted to the pool's [alerts] webhook only"
    } else {
        "they are written to the controller's log only"
    };
    let who = req.mail_user.as_deref().unwrap_or(user);
    if config.mail.smtp.is_none() {
        return Some(format!(
            "--mail-type: no e-mail is sent, as this pool has no mail relay ([mail] smtp in the controller's labpool.toml); {instead}. Ask an admin to set [mail] smtp, or drop --mail-type"
        ));
    }
    address_of(&config.mail, who).is_none().then(|| {
        format!(
            "--mail-type: no e-mail is sent to {who:?}: it is a login name and [mail] domain is not set; {instead}. Give --mail-user=ADDRESS"
        )
    })
}

/// A subject as mail clients show it: a job's name may be any text, and an RFC 2047 encoded word
/// in it (`=?utf-8?b?…?=`) would be decoded into something else; a zero-width space after the
/// `=` keeps it literal (and makes the subject an encoded word of its own).
fn literal_subject(subject: &str) -> String {
    subject.replace("=?", "=\u{200b}?")
}

pub(crate) async fn send_mail(
    relay: &str,
    from: Option<&str>,
    to: &str,
    subject: &str,
    body: &str,
) -> anyhow::Result<()> {
    let subject = literal_subject(subject);
    let (host, port) = relay
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .ok_or_else(|| anyhow::anyhow!("[mail] smtp {relay:?} is not HOST:PORT"))?;
    let host_name = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string());
    let from: Mailbox = from
        .map(str::to_string)
        .unwrap_or_else(|| format!("labpool@{host_name}"))
        .parse()?;
    let message = Message::builder()
        .from(from)
        .to(to.parse()?)
        .subject(subject.as_str())
        .body(body.to_string())?;
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
        .port(port)
        .timeout(Some(std::time::Duration::from_secs(10)))
        .build();
    transport.send(message).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job named as an encoded word reaches the subject as the text it is.
    #[test]
    fn an_encoded_word_in_a_job_name_stays_literal() {
        let name = "=?utf-8?b?WW91ciBhY2NvdW50IGlzIHN1c3BlbmRlZA==?=";
        let subject = literal_subject(&format!("labpool Job_id=4 Name={name} Began"));
        let m = Message::builder()
            .from("labpool@lab.example".parse().unwrap())
            .to("alice@lab.example".parse().unwrap())
            .subject(subject)
            .body(String::new())
            .unwrap();
        let text = String::from_utf8(m.formatted()).unwrap();
        assert!(!text.contains(name), "{text}");
    }
}
