//! Quotas in the controller: usage scans (on a schedule and on demand), the limits that apply
//! to a user, the decision at submit, the scratch purge (plan, then execute) with its notices,
//! and the datasets audit. The work itself is the `labpool-quotas` crate's.

use crate::api::quotas::LimitSource;
use crate::clock::Clock;
use crate::db::Db;
use crate::error::ApiError;
use crate::quotas::db::DEFAULT_USER;
use crate::quotas::scan::ScanState;
use crate::quotas::stored::StoredCopy;
use crate::schedule::Schedule;
use crate::settings::{Config, QuotaFs};
use crate::timers::{Task, TaskRun, Timers};
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
    /// The quota tables' rows, kept between writes: the submit check reads them every time.
    pub(super) stored: StoredCopy,
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
            stored: StoredCopy::default(),
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

/// The scheduled scan, purge and audit, one at a time (they walk the same disks), with their
/// last runs kept in `STATE_DIR/quota-timer.json`. An empty schedule switches one off.
pub fn timers(service: Arc<QuotaService>, clock: Arc<dyn Clock>) -> Timers {
    let c = &service.config;
    let scan = c
        .quotas
        .scan_schedule
        .clone()
        .unwrap_or_else(|| "0 * * * *".to_string());
    let purge = if c.purge.enabled {
        c.purge.schedule.clone()
    } else {
        String::new()
    };
    let mut tasks = Vec::new();
    let mut add = |name: &str, text: &str, run: fn(Arc<QuotaService>) -> TaskRun| {
        if let Some(schedule) = (!text.is_empty())
            .then(|| Schedule::parse(text).ok())
            .flatten()
        {
            let service = service.clone();
            tasks.push(Task {
                name: name.to_string(),
                schedule,
                run: Box::new(move || run(service.clone())),
            });
        }
    };
    add("scan", &scan, |s| Box::pin(scheduled_scan(s)));
    add("purge", &purge, |s| Box::pin(scheduled_purge(s)));
    add("audit", &c.datasets.audit_schedule.clone(), |s| {
        Box::pin(scheduled_audit(s))
    });
    Timers {
        name: "quotas",
        state_file: service.config.controller.state_dir.join("quota-timer.json"),
        tasks,
        clock,
    }
}

/// A scan, waited for, so a purge at the same minute does not walk alongside it.
async fn scheduled_scan(service: Arc<QuotaService>) -> Result<String, String> {
    service.start_scan(None).await.map_err(|e| e.body.error)?;
    while service.scan_status().running {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    match service.scan_status().error {
        Some(e) => Err(e),
        None => Ok("scheduled quota scan done".to_string()),
    }
}

async fn scheduled_purge(service: Arc<QuotaService>) -> Result<String, String> {
    let (id, _) = service.plan_purge().await.map_err(|e| e.body.error)?;
    let done = service.execute_purge(&id).await.map_err(|e| e.body.error)?;
    Ok(format!(
        "scheduled scratch purge done: {}, {}, {}",
        labpool_units::count(done.removed.files, "file"),
        labpool_units::format_size(done.removed.bytes),
        labpool_units::count(done.notices.len() as u64, "notice")
    ))
}

async fn scheduled_audit(service: Arc<QuotaService>) -> Result<String, String> {
    let r = service.audit(false).await.map_err(|e| e.body.error)?;
    Ok(format!(
        "scheduled datasets audit done: {} checked, {} offenders",
        r.checked,
        r.offenders.len()
    ))
}
