//! The scheduled off-box copy: on `[snapshots] copy_schedule` (every ten minutes by default),
//! one at a time with the backups,
//! the repository is copied to `[snapshots] copy_to`, which sends only what is new; when the
//! newest snapshot has not reached the copy for `copy_max_lag`, the alert webhook is told,
//! once a day while it lasts.

use crate::db::Db;
use crate::schedule::Schedule;
use crate::snapshot_copies::CopyTarget;
use crate::snapshot_copies::run::{lag_alert, read_status, run_copy};
use crate::snapshots::SnapshotService;
use crate::timers::{Task, TaskRun};
use chrono::{DateTime, Utc};
use labpool_snapshots::Progress;
use std::sync::{Arc, Mutex};

/// The copy task, when `[snapshots] copy_to` is set.
pub fn copy_task(service: Arc<SnapshotService>, db: Db) -> Option<Task> {
    let target = service.config().snapshots.copy_to.clone()?;
    let alerted: Arc<Mutex<Option<DateTime<Utc>>>> = Arc::default();
    Some(Task {
        // Not a word a snapshot source may be named, so the two never share a timer entry.
        name: "off-box copy".into(),
        schedule: Schedule::parse(&service.config().snapshots.copy_schedule).ok()?,
        run: Box::new(move || -> TaskRun {
            let (service, db, target, alerted) =
                (service.clone(), db.clone(), target.clone(), alerted.clone());
            Box::pin(async move {
                let result = copy_now(&service, &db, &target).await;
                alert_if_behind(&service, &alerted).await;
                result
            })
        }),
    })
}

/// Copies now; the summary, or why it failed.
async fn copy_now(service: &SnapshotService, db: &Db, target: &str) -> Result<String, String> {
    if service.repo().map_err(|e| e.to_string())?.is_none() {
        return Ok("no repository yet; nothing to copy".into());
    }
    let address = match CopyTarget::parse(target) {
        Ok(CopyTarget::Node(name)) => db
            .agent_nodes()
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .find(|(spec, _, _)| spec.name == name)
            .map(|(_, _, address)| address),
        _ => None,
    };
    let config = service.config().clone();
    let target = target.to_string();
    let runtime = tokio::runtime::Handle::current();
    let done = tokio::task::spawn_blocking(move || {
        run_copy(
            &config,
            Some(&target),
            address,
            false,
            &Progress::default(),
            runtime,
        )
    })
    .await
    .map_err(|e| format!("the copy panicked: {e}"))?;
    match done {
        Ok((target, r)) => Ok(format!(
            "snapshot copy to {target:?}: {} ({}) sent, {} there already, {} there",
            labpool_units::count(r.files_sent, "file"),
            labpool_units::format_size(r.bytes_sent),
            r.files_present,
            labpool_units::count(r.records, "snapshot")
        )),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Posts the lag alert when the copy is behind, at most once a day for the same snapshot.
async fn alert_if_behind(service: &SnapshotService, alerted: &Mutex<Option<DateTime<Utc>>>) {
    let config = service.config();
    let (Some(url), Some(status)) = (config.alerts.webhook.clone(), read_status(config)) else {
        return;
    };
    let newest = service
        .repo()
        .ok()
        .flatten()
        .and_then(|r| r.snapshots().ok())
        .and_then(|s| s.iter().map(|s| s.time).max());
    let now = Utc::now();
    let Some(alert) = lag_alert(&status, newest, now, config.snapshots.copy_max_lag) else {
        return;
    };
    {
        let mut last = alerted.lock().expect("not poisoned");
        if last.is_some_and(|t| (now - t) < chrono::TimeDelta::hours(24)) {
            return;
        }
        *last = Some(now);
    }
    tracing::error!("{}", alert["text"].as_str().unwrap_or_default());
    if let Err(e) = crate::webhook::post(&url, &alert).await {
        tracing::warn!("the copy alert was not posted: {e:#}");
    }
}
