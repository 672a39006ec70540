//! The slower-moving state `/metrics` carries, gathered every half minute rather than on each
//! sample: members' credits this month, the node caches, snapshot runs, quota use at the last
//! scan, and the last scratch purge.

use super::MonitorService;
use crate::engine::request::Request;
use crate::quotas::purge::PurgeLast;
use labpool_monitor::page::Extras;
use std::collections::BTreeSet;
use tokio::sync::oneshot;

/// How often the extras are gathered, ms: every 30 s, or every 6 samples when sampling is
/// faster than every 5 s.
pub fn every_ms(sample_interval: std::time::Duration) -> i64 {
    (sample_interval.as_millis() as i64 * 6).min(30_000)
}

/// Gathers the extras.
pub async fn gather(service: &MonitorService) -> anyhow::Result<Extras> {
    let config = &service.config;
    let mut x = Extras::default();
    let now = service.clock.now_ms();
    let (month_start, _, _, _) = crate::clock::month_of(now);
    let mut users: BTreeSet<String> = service
        .db
        .ledger(None, month_start)
        .await?
        .into_iter()
        .map(|e| e.user)
        .collect();
    users.extend(service.lock().running.values().map(|r| r.user.clone()));
    for user in users {
        let (tx, rx) = oneshot::channel();
        let req = Request::Credits {
            user: user.clone(),
            reply: tx,
        };
        if service.engine.send(req).await.is_err() {
            return Ok(x);
        }
        if let Ok(c) = rx.await {
            x.credits.push((user, c.balance, c.charged, c.rebated));
        }
    }
    let (tx, rx) = oneshot::channel();
    if service
        .engine
        .send(Request::CacheStatus {
            node: None,
            reply: tx,
        })
        .await
        .is_ok()
        && let Ok(Ok(caches)) = rx.await
    {
        for c in caches {
            x.caches.push((
                c.node,
                c.capacity,
                c.used_bytes,
                c.staging.len() as u32,
                c.queued.len() as u32,
            ));
        }
    }
    for run in crate::snapshots::service::runs(config) {
        x.snapshots
            .push((run.name, run.last_ok_ms, run.failure.is_some()));
    }
    if let Some(quotas) = &service.quotas
        && let Ok(report) = quotas.report().await
    {
        for u in report {
            for fs in u.filesystems {
                if let Some(usage) = fs.usage {
                    x.quotas
                        .push((u.user.clone(), fs.fs, usage.bytes, fs.limit.hard_bytes));
                }
            }
        }
    }
    x.purge = PurgeLast::read(&config.controller.state_dir).map(|p| (p.at_ms, p.files, p.bytes));
    Ok(x)
}
