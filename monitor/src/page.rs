//! The pool's `/metrics` page, from a plain view of the pool: every node's GPUs under
//! dcgm-exporter's names, labelled with the labpool job and user that hold each card, and
//! labpool's own series. Per-job series cover running jobs only, so the page's size follows the
//! pool's, not its history's.

use crate::dcgm::{self, Holder};
use crate::exposition::{Exposition, Kind};
use crate::sample::NodeSample;
use crate::usage::JobUsage;
use std::collections::BTreeMap;

/// A node's line.
#[derive(Debug, Clone, Default)]
pub struct NodeLine {
    /// Name.
    pub name: String,
    /// GPUs it has.
    pub gpus: u32,
    /// GPUs a job holds.
    pub held: u32,
    /// Not DOWN.
    pub up: bool,
    /// Slices held on its sliced cards: (GPU, job, part of the card).
    pub slices: Vec<(u32, u64, f64)>,
}

/// A running job's line.
#[derive(Debug, Clone, Default)]
pub struct RunningLine {
    /// Job.
    pub job: u64,
    /// Owner.
    pub user: String,
    /// Partition.
    pub partition: String,
    /// Its GPUs by node.
    pub gpus: BTreeMap<String, Vec<u32>>,
    /// Its usage summary, once sampled.
    pub usage: Option<JobUsage>,
}

/// The slower-moving state, gathered every half minute: credits, caches, snapshots, quotas
/// and the last purge.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Per member this month: balance, charged, rebated.
    pub credits: Vec<(String, f64, f64, f64)>,
    /// Per node cache: capacity, bytes used, versions staging now, versions queued.
    pub caches: Vec<(String, u64, u64, u32, u32)>,
    /// Per snapshot source: last success (ms), failing now.
    pub snapshots: Vec<(String, Option<i64>, bool)>,
    /// Per member and quota file system: bytes used, hard limit (bytes).
    pub quotas: Vec<(String, String, u64, Option<u64>)>,
    /// The last purge: when (ms), files and bytes removed.
    pub purge: Option<(i64, u64, u64)>,
}

/// What the page shows.
#[derive(Debug, Clone, Default)]
pub struct PoolView {
    /// Now, ms.
    pub now_ms: i64,
    /// Each node's last sample and when it arrived (ms).
    pub samples: BTreeMap<String, (NodeSample, i64)>,
    /// Jobs by (state, partition).
    pub jobs: BTreeMap<(String, String), u64>,
    /// The oldest waiting job's wait per partition, ms.
    pub oldest_wait_ms: BTreeMap<String, i64>,
    /// Nodes.
    pub nodes: Vec<NodeLine>,
    /// Running jobs.
    pub running: Vec<RunningLine>,
    /// Zombie jobs by kind.
    pub zombies: BTreeMap<String, u64>,
    /// Alerts firing by (rule, severity).
    pub alerts: BTreeMap<(String, String), u64>,
    /// Remote agents' clock skew, ms.
    pub skew_ms: BTreeMap<String, i64>,
    /// Disks and their fill, percent.
    pub disks: Vec<(String, f64)>,
    /// Credits, caches, snapshots, quotas, purge.
    pub extras: Extras,
}

/// The page's text.
pub fn render(v: &PoolView) -> String {
    let mut page = Exposition::new();
    // (node, GPU) -> the jobs holding it and their users.
    type Holders<'a> = BTreeMap<(&'a str, u32), (Vec<String>, Vec<&'a str>)>;
    let mut holders: Holders = BTreeMap::new();
    for r in &v.running {
        for (node, gpus) in &r.gpus {
            for g in gpus {
                let h = holders.entry((node.as_str(), *g)).or_default();
                h.0.push(r.job.to_string());
                h.1.push(&r.user);
            }
        }
    }
    for (node, (sample, _)) in &v.samples {
        dcgm::write_node(&mut page, node, sample, |index| {
            holders
                .get(&(node.as_str(), index))
                .map(|(jobs, users)| Holder {
                    job: jobs.join(","),
                    user: users.join(","),
                })
                .unwrap_or_default()
        });
    }
    let g = Kind::Gauge;
    page.family(
        "labpool_jobs",
        g,
        "Jobs in the queue, by state and partition.",
    );
    for ((state, partition), n) in &v.jobs {
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
    for (partition, ms) in &v.oldest_wait_ms {
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
        "1 when the node answers and takes or runs jobs, 0 when it is down or not responding.",
    );
    page.family(
        "labpool_gpu_slice",
        g,
        "The part of a sliced card each job holds (0.25: a quarter), by node, GPU and job.",
    );
    for n in &v.nodes {
        for (gpu, job, part) in &n.slices {
            page.sample(
                "labpool_gpu_slice",
                &[
                    ("node", &n.name),
                    ("gpu", &gpu.to_string()),
                    ("job", &job.to_string()),
                ],
                *part,
            );
        }
        for (state, count) in [
            ("allocated", n.held),
            ("idle", n.gpus.saturating_sub(n.held)),
        ] {
            page.sample(
                "labpool_gpus",
                &[("node", &n.name), ("state", state)],
                f64::from(count),
            );
        }
        page.sample(
            "labpool_node_up",
            &[("node", &n.name)],
            if n.up { 1.0 } else { 0.0 },
        );
    }
    let per_job = [
        (
            "labpool_job_gpu_utilization_percent",
            "A running job's GPU utilisation at the last sample, mean over its GPUs.",
        ),
        (
            "labpool_job_gpu_utilization_mean_percent",
            "A running job's mean GPU utilisation since it started.",
        ),
        (
            "labpool_job_gpu_memory_mib",
            "A running job's GPU memory at the last sample, MiB.",
        ),
        (
            "labpool_job_gpu_energy_joules",
            "Energy a running job's GPUs used since it started, J.",
        ),
    ];
    for (name, help) in per_job {
        page.family(name, g, help);
    }
    for r in &v.running {
        let Some(u) = &r.usage else {
            continue;
        };
        let job = r.job.to_string();
        let labels = [
            ("job", job.as_str()),
            ("user", &r.user),
            ("partition", &r.partition),
        ];
        let values = [
            u.last.util,
            u.util_mean(),
            u.last.mem_mib as f64,
            u.energy_j,
        ];
        for ((name, _), value) in per_job.iter().zip(values) {
            page.sample(name, &labels, value);
        }
    }
    page.family(
        "labpool_zombie_jobs",
        g,
        "Running jobs the zombie rules flag, by kind.",
    );
    for (kind, n) in &v.zombies {
        page.sample("labpool_zombie_jobs", &[("kind", kind)], *n as f64);
    }
    page.family(
        "labpool_alerts_firing",
        g,
        "Alerts firing now, by rule and severity.",
    );
    for ((rule, severity), n) in &v.alerts {
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
    for (node, skew) in &v.skew_ms {
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
    for (node, (sample, got)) in &v.samples {
        page.sample(
            "labpool_gpu_sample_duration_seconds",
            &[("node", node)],
            sample.took_us as f64 / 1e6,
        );
        page.sample(
            "labpool_gpu_sample_age_seconds",
            &[("node", node)],
            (v.now_ms - got).max(0) as f64 / 1000.0,
        );
    }
    page.family(
        "labpool_disk_used_percent",
        g,
        "How full each of the pool's disks is (state, cache, home, scratch, snapshots), as df counts.",
    );
    for (path, percent) in &v.disks {
        page.sample(
            "labpool_disk_used_percent",
            &[("path", path)],
            (percent * 10.0).round() / 10.0,
        );
    }
    extras(&mut page, v);
    page.finish()
}

fn extras(page: &mut Exposition, v: &PoolView) {
    let g = Kind::Gauge;
    let x = &v.extras;
    let families = [
        (
            "labpool_credits_balance",
            "A member's credit balance this month, running jobs counted.",
        ),
        (
            "labpool_credits_charged",
            "Credits charged to a member this month.",
        ),
        (
            "labpool_credits_rebated",
            "Credits given back to a member this month for efficient GPU use.",
        ),
        (
            "labpool_cache_capacity_bytes",
            "A node's dataset cache capacity.",
        ),
        (
            "labpool_cache_used_bytes",
            "Bytes a node's dataset cache holds.",
        ),
        (
            "labpool_cache_staging",
            "Dataset versions being staged onto a node now.",
        ),
        (
            "labpool_cache_queued",
            "Dataset versions waiting to be staged onto a node.",
        ),
        (
            "labpool_snapshot_last_success_timestamp_seconds",
            "When a snapshot source last succeeded.",
        ),
        (
            "labpool_snapshot_age_seconds",
            "Time since a snapshot source last succeeded.",
        ),
        (
            "labpool_snapshot_failing",
            "1 while a snapshot source's last run failed.",
        ),
        (
            "labpool_quota_used_bytes",
            "Bytes a member uses on a quota file system, at the last scan.",
        ),
        (
            "labpool_quota_hard_bytes",
            "A member's hard limit on a quota file system.",
        ),
        (
            "labpool_purge_last_run_timestamp_seconds",
            "When the scratch purge last ran.",
        ),
        (
            "labpool_purge_last_removed_files",
            "Files the last scratch purge removed.",
        ),
        (
            "labpool_purge_last_removed_bytes",
            "Bytes the last scratch purge removed.",
        ),
    ];
    for (name, help) in families {
        page.family(name, g, help);
    }
    for (user, balance, charged, rebated) in &x.credits {
        let l = [("user", user.as_str())];
        page.sample("labpool_credits_balance", &l, *balance);
        page.sample("labpool_credits_charged", &l, *charged);
        page.sample("labpool_credits_rebated", &l, *rebated);
    }
    for (node, capacity, used, staging, queued) in &x.caches {
        let l = [("node", node.as_str())];
        page.sample("labpool_cache_capacity_bytes", &l, *capacity as f64);
        page.sample("labpool_cache_used_bytes", &l, *used as f64);
        page.sample("labpool_cache_staging", &l, f64::from(*staging));
        page.sample("labpool_cache_queued", &l, f64::from(*queued));
    }
    for (source, last, failing) in &x.snapshots {
        let l = [("source", source.as_str())];
        if let Some(t) = last {
            page.sample(
                "labpool_snapshot_last_success_timestamp_seconds",
                &l,
                *t as f64 / 1000.0,
            );
            page.sample(
                "labpool_snapshot_age_seconds",
                &l,
                (v.now_ms - t).max(0) as f64 / 1000.0,
            );
        }
        page.sample(
            "labpool_snapshot_failing",
            &l,
            if *failing { 1.0 } else { 0.0 },
        );
    }
    for (user, fs, used, hard) in &x.quotas {
        let l = [("user", user.as_str()), ("fs", fs.as_str())];
        page.sample("labpool_quota_used_bytes", &l, *used as f64);
        if let Some(h) = hard {
            page.sample("labpool_quota_hard_bytes", &l, *h as f64);
        }
    }
    if let Some((at, files, bytes)) = x.purge {
        page.sample(
            "labpool_purge_last_run_timestamp_seconds",
            &[],
            at as f64 / 1000.0,
        );
        page.sample("labpool_purge_last_removed_files", &[], files as f64);
        page.sample("labpool_purge_last_removed_bytes", &[], bytes as f64);
    }
}
