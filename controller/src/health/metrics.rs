//! The pool's `/metrics` page: what the monitor holds, as the plain view
//! `labpool_monitor::page` renders.

use super::MonitorService;
use labpool_monitor::page::{NodeLine, PoolView, RunningLine, render as render_view};
use labpool_scheduler::JobState;
use labpool_scheduler::node::NodeState;
use std::collections::BTreeMap;

/// The page.
pub fn render(service: &MonitorService) -> String {
    let now = service.clock.now_ms();
    let mut view = {
        let inner = service.lock();
        let mut jobs: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut oldest: BTreeMap<String, i64> = BTreeMap::new();
        for j in &inner.jobs {
            *jobs
                .entry((j.state.to_string(), j.spec.partition.clone()))
                .or_default() += 1;
            if j.state == JobState::Pending {
                let w = oldest.entry(j.spec.partition.clone()).or_default();
                *w = (*w).max((now - j.spec.submit_time.0).max(0));
            }
        }
        let mut zombies: BTreeMap<String, u64> = BTreeMap::new();
        for (kind, _) in inner.zombies.values() {
            *zombies.entry(kind.as_str().to_string()).or_default() += 1;
        }
        let mut alerts: BTreeMap<(String, String), u64> = BTreeMap::new();
        for a in inner
            .alerts
            .as_ref()
            .map(|e| e.firing())
            .unwrap_or_default()
        {
            *alerts
                .entry((a.rule, a.severity.as_str().to_string()))
                .or_default() += 1;
        }
        PoolView {
            now_ms: now,
            samples: inner.samples.clone(),
            jobs,
            oldest_wait_ms: oldest,
            nodes: inner
                .nodes
                .iter()
                .map(|n| NodeLine {
                    name: n.name.clone(),
                    gpus: n.gpus.len() as u32,
                    held: n
                        .gpus
                        .iter()
                        .filter(|g| !g.jobs.is_empty() || g.job.is_some())
                        .count() as u32,
                    up: n.state != NodeState::Down && n.responding,
                    slices: n
                        .gpus
                        .iter()
                        .filter(|g| !g.slices.is_empty())
                        .flat_map(|g| {
                            g.jobs.iter().zip(&g.units).map(move |(j, u)| {
                                (g.index, *j, f64::from(*u) / f64::from(g.share.max(1)))
                            })
                        })
                        .collect(),
                })
                .collect(),
            running: inner
                .running
                .values()
                .map(|r| RunningLine {
                    job: r.job,
                    user: r.user.clone(),
                    partition: r.partition.clone(),
                    gpus: r.gpus.clone(),
                    usage: inner.usage.get(&(r.job, r.attempt)).cloned(),
                })
                .collect(),
            zombies,
            alerts,
            skew_ms: inner.skew_ms.clone(),
            disks: Vec::new(),
            extras: inner.extras.0.clone(),
        }
    };
    if !service.config.metrics.per_member {
        view.extras.credits.clear();
        view.extras.quotas.clear();
    }
    view.disks = super::observe::disks(&service.config)
        .into_iter()
        .map(|(p, v)| (p.display().to_string(), v))
        .collect();
    render_view(&view)
}
