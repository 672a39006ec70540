//! The pool's `/metrics` page: every node's GPUs under dcgm-exporter's names, labelled with the
//! labpool job and user that hold each card, and labpool's own series. Per-job series cover
//! running jobs only, so the page's size follows the pool's, not its history's.

use super::MonitorService;
use labpool_monitor::dcgm::{self, Holder};
use labpool_monitor::exposition::{Exposition, Kind};
use labpool_scheduler::JobState;
use labpool_scheduler::node::NodeState;
use std::collections::BTreeMap;

/// The page.
pub fn render(service: &MonitorService) -> String {
    let now = service.clock.now_ms();
    let inner = service.lock();
    let mut page = Exposition::new();
    for (node, (sample, _)) in &inner.samples {
        dcgm::write_node(&mut page, node, sample, |index| {
            let holders: Vec<&super::Running> = inner
                .running
                .values()
                .filter(|r| r.gpus.get(node).is_some_and(|g| g.contains(&index)))
                .collect();
            Holder {
                job: join(holders.iter().map(|r| r.job.to_string())),
                user: join(holders.iter().map(|r| r.user.clone())),
            }
        });
    }
    let g = Kind::Gauge;
    page.family(
        "labpool_jobs",
        g,
        "Jobs in the queue, by state and partition.",
    );
    let mut by_state: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut oldest: BTreeMap<String, i64> = BTreeMap::new();
    for j in &inner.jobs {
        *by_state
            .entry((j.state.to_string(), j.spec.partition.clone()))
            .or_default() += 1;
        if j.state == JobState::Pending {
            let wait = (now - j.spec.submit_time.0).max(0);
            let w = oldest.entry(j.spec.partition.clone()).or_default();
            *w = (*w).max(wait);
        }
    }
    for ((state, partition), n) in &by_state {
        page.sample(
            "labpool_jobs",
            &[("state", state), ("partition", partition)],
            *n as f64,
        );
    }
    page.family(
        "labpool_queue_wait_max_seconds",
        g,
        "How long the oldest waiting job of each partition has waited.",
    );
    for (partition, ms) in &oldest {
        page.sample(
            "labpool_queue_wait_max_seconds",
            &[("partition", partition)],
            *ms as f64 / 1000.0,
        );
    }
    page.family(
        "labpool_gpus",
        g,
        "GPUs by node and whether a job holds them.",
    );
    page.family(
        "labpool_node_up",
        g,
        "1 when the node takes or runs jobs, 0 when it is down.",
    );
    for n in &inner.nodes {
        let held = n
            .gpus
            .iter()
            .filter(|g| !g.jobs.is_empty() || g.job.is_some())
            .count();
        let idle = n.gpus.len() - held;
        for (state, count) in [("allocated", held), ("idle", idle)] {
            page.sample(
                "labpool_gpus",
                &[("node", &n.name), ("state", state)],
                count as f64,
            );
        }
        let up = if n.state == NodeState::Down { 0.0 } else { 1.0 };
        page.sample("labpool_node_up", &[("node", &n.name)], up);
    }
    page.family(
        "labpool_job_gpu_utilization_percent",
        g,
        "A running job's GPU utilisation at the last sample, mean over its GPUs.",
    );
    page.family(
        "labpool_job_gpu_utilization_mean_percent",
        g,
        "A running job's mean GPU utilisation since it started.",
    );
    page.family(
        "labpool_job_gpu_memory_mib",
        g,
        "A running job's GPU memory at the last sample, MiB.",
    );
    page.family(
        "labpool_job_gpu_energy_joules",
        g,
        "Energy a running job's GPUs used since it started, J.",
    );
    for r in inner.running.values() {
        let Some(u) = inner.usage.get(&(r.job, r.attempt)) else {
            continue;
        };
        let job = r.job.to_string();
        let labels = [
            ("job", job.as_str()),
            ("user", &r.user),
            ("partition", &r.partition),
        ];
        page.sample("labpool_job_gpu_utilization_percent", &labels, u.last.util);
        page.sample(
            "labpool_job_gpu_utilization_mean_percent",
            &labels,
            u.util_mean(),
        );
        page.sample("labpool_job_gpu_memory_mib", &labels, u.last.mem_mib as f64);
        page.sample("labpool_job_gpu_energy_joules", &labels, u.energy_j);
    }
    page.family(
        "labpool_zombie_jobs",
        g,
        "Running jobs the zombie rules flag, by kind.",
    );
    let mut zombies: BTreeMap<&str, u64> = BTreeMap::new();
    for (kind, _) in inner.zombies.values() {
        *zombies.entry(kind.as_str()).or_default() += 1;
    }
    for (kind, n) in zombies {
        page.sample("labpool_zombie_jobs", &[("kind", kind)], n as f64);
    }
    page.family(
        "labpool_alerts_firing",
        g,
        "Alerts firing now, by rule and severity.",
    );
    let mut firing: BTreeMap<(String, &str), u64> = BTreeMap::new();
    if let Some(e) = &inner.alerts {
        for a in e.firing() {
            *firing
                .entry((a.rule.clone(), a.severity.as_str()))
                .or_default() += 1;
        }
    }
    for ((rule, severity), n) in &firing {
        page.sample(
            "labpool_alerts_firing",
            &[("rule", rule), ("severity", severity)],
            *n as f64,
        );
    }
    page.family(
        "labpool_node_clock_skew_seconds",
        g,
        "A remote agent's clock minus the controller's, at its last heartbeat.",
    );
    for (node, skew) in &inner.skew_ms {
        page.sample(
            "labpool_node_clock_skew_seconds",
            &[("node", node)],
            *skew as f64 / 1000.0,
        );
    }
    page.family(
        "labpool_gpu_sample_duration_seconds",
        g,
        "How long the node's last GPU reading took (the sampling overhead).",
    );
    page.family(
        "labpool_gpu_sample_age_seconds",
        g,
        "Time since the node's last GPU reading arrived.",
    );
    for (node, (sample, got)) in &inner.samples {
        page.sample(
            "labpool_gpu_sample_duration_seconds",
            &[("node", node)],
            sample.took_us as f64 / 1e6,
        );
        page.sample(
            "labpool_gpu_sample_age_seconds",
            &[("node", node)],
            (now - got).max(0) as f64 / 1000.0,
        );
    }
    drop(inner);
    page.family(
        "labpool_disk_used_percent",
        g,
        "How full each of the pool's disks is (state, cache, home, scratch, snapshots), as df counts.",
    );
    for (path, percent) in super::observe::disks(&service.config) {
        page.sample(
            "labpool_disk_used_percent",
            &[("path", &path.display().to_string())],
            (percent * 10.0).round() / 10.0,
        );
    }
    page.finish()
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(",")
}
