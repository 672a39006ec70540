//! Quotas in the controller: usage scans (on a schedule and on demand), the limits that apply
//! to a user, the decision at submit, the scratch purge (plan, then execute) with its notices,
//! and the datasets audit. The work itself is the `labpool-quotas` crate's.

use crate::api::quotas::LimitSource;
use crate::controller::db::Db;
use crate::controller::error::ApiError;
use crate::controller::quotas::db::DEFAULT_USER;
use crate::controller::quotas::scan::ScanState;
use crate::settings::{Config, QuotaFs};
use labpool_quotas::limits::Limit;
use labpool_quotas::purge::PurgePlan;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The quota service, shared by the API and the timers.
pub struct QuotaService {
    /// The config.
    pub config: Arc<Config>,
    pub(super) db: Db,
    pub(super) scan: Mutex<ScanState>,
    pub(super) scan_lock: tokio::sync::Mutex<()>,
    pub(super) purge_lock: tokio::sync::Mutex<()>,
    pub(super) plans: Mutex<BTreeMap<String, (PurgePlan, Instant)>>,
}

impl QuotaService {
    /// A service over `db`.
    pub fn new(config: Arc<Config>, db: Db) -> Arc<QuotaService> {
        Arc::new(QuotaService {
            config,
            db,
            scan: Mutex::new(ScanState::default()),
            scan_lock: tokio::sync::Mutex::new(()),
            purge_lock: tokio::sync::Mutex::new(()),
            plans: Mutex::new(BTreeMap::new()),
        })
    }

    /// The limited file systems.
    pub fn filesystems(&self) -> Vec<QuotaFs> {
        self.config.quota_filesystems().unwrap_or_default()
    }

    pub(super) fn fs(&self, name: &str) -> Result<QuotaFs, ApiError> {
        self.filesystems()
            .into_iter()
            .find(|f| f.name == name)
            .ok_or_else(|| {
                ApiError::bad_request(
                    format!("no file system {name:?}: the limited ones are home and scratch"),
                    None,
                )
            })
    }

    /// The limit that applies to `user` on `fs`, and where it comes from.
    pub(super) fn effective(
        limits: &BTreeMap<(String, String), Limit>,
        user: &str,
        fs: &QuotaFs,
    ) -> (Limit, LimitSource) {
        if let Some(l) = limits.get(&(user.to_string(), fs.name.clone())) {
            return (*l, LimitSource::User);
        }
        if let Some(l) = limits.get(&(DEFAULT_USER.to_string(), fs.name.clone())) {
            return (*l, LimitSource::Default);
        }
        (fs.default_limit, LimitSource::Config)
    }
}

/// Runs the scheduled scan, purge and audit until `stop`. Each waits for the one before it:
/// they walk the same disks. A run missed while the controller was down is not caught up; the
/// next one comes at its time.
pub async fn timer(service: Arc<QuotaService>, mut stop: tokio::sync::watch::Receiver<bool>) {
    use crate::schedule::Schedule;
    let c = &service.config;
    let scan_text = c
        .quotas
        .scan_schedule
        .clone()
        .unwrap_or_else(|| "0 * * * *".to_string());
    let purge_text = if c.purge.enabled {
        c.purge.schedule.clone()
    } else {
        String::new()
    };
    let parse = |t: &str| (!t.is_empty()).then(|| Schedule::parse(t).ok()).flatten();
    let jobs: Vec<(&str, Option<Schedule>)> = vec![
        ("scan", parse(&scan_text)),
        ("purge", parse(&purge_text)),
        ("audit", parse(&c.datasets.audit_schedule)),
    ];
    let mut last: BTreeMap<&str, chrono::DateTime<chrono::Utc>> =
        jobs.iter().map(|(n, _)| (*n, chrono::Utc::now())).collect();
    loop {
        let now = chrono::Utc::now();
        for (name, sched) in &jobs {
            let Some(sched) = sched else { continue };
            if sched.due(last[name], now).is_none() {
                continue;
            }
            last.insert(name, now);
            match *name {
                "scan" => {
                    if let Err(e) = service.start_scan(None).await {
                        tracing::error!("scheduled quota scan: {}", e.body.error);
                    }
                    // Wait for it, so a purge at the same minute does not walk alongside it.
                    while service.scan_status().running {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    if let Some(e) = service.scan_status().error {
                        tracing::error!("scheduled quota scan failed: {e}");
                    }
                }
                "purge" => {
                    let result = match service.plan_purge().await {
                        Ok((id, _)) => service.execute_purge(&id).await,
                        Err(e) => Err(e),
                    };
                    match result {
                        Ok(done) => tracing::info!(
                            files = done.removed.files,
                            bytes = done.removed.bytes,
                            notices = done.notices.len(),
                            "scheduled scratch purge done"
                        ),
                        Err(e) => tracing::error!("scheduled scratch purge: {}", e.body.error),
                    }
                }
                _ => match service.audit(false).await {
                    Ok(r) => tracing::info!(
                        checked = r.checked,
                        offenders = r.offenders.len(),
                        "scheduled datasets audit done"
                    ),
                    Err(e) => tracing::error!("scheduled datasets audit: {}", e.body.error),
                },
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}
