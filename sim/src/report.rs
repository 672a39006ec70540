//! What a simulation run measured, per policy and per user.

use super::sim_credit_weights;
use labpool_scheduler::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One finished job, as the report needs it.
#[derive(Debug, Clone)]
pub struct JobRecord {
    /// Its id in the trace.
    pub job: u64,
    /// The node it ran on (last, when it was preempted and ran again).
    pub node: String,
    /// Its user.
    pub user: String,
    /// Its GPUs.
    pub gpus: u32,
    /// The part of each GPU it held: 1, or a slice's fraction (0.25).
    pub part: f64,
    /// The type it ran on.
    pub gpu_type: String,
    /// Submitted.
    pub submit: Timestamp,
    /// Given its GPUs.
    pub placed: Timestamp,
    /// Started computing (its data was there).
    pub compute: Timestamp,
    /// Ended.
    pub end: Timestamp,
    /// Its time limit, ms.
    pub limit_ms: Option<i64>,
    /// When it was first given GPUs (before any preemption).
    pub first_placed: Timestamp,
    /// It fit within its account's share when submitted: an owner's job.
    pub within_share: bool,
}

/// Counts kept outside the job records.
#[derive(Debug, Clone)]
pub struct Totals {
    /// Trace jobs no node could ever take.
    pub rejected: usize,
    /// Jobs that had not ended when the run stopped.
    pub unfinished: usize,
    /// GPUs in the cluster.
    pub total_gpus: u32,
    /// Bytes read from shared storage.
    pub shared_bytes: f64,
    /// Dataset needs found complete on the node when the job was placed.
    pub hits: u64,
    /// Dataset needs in all.
    pub needs: u64,
    /// Preemptions carried out.
    pub preemptions: u64,
    /// GPU-seconds between notice and stop.
    pub lost_gpu_s: f64,
    /// GPU-seconds held by attempts that were preempted.
    pub preempted_held_gpu_s: f64,
    /// GPU-seconds of the pool while some job waited.
    pub demand_gpu_s: f64,
    /// GPU-seconds given out while some job waited.
    pub held_with_demand_gpu_s: f64,
    /// What the copies were for.
    pub copies: CopyCounts,
}

/// What a run counts about its copies, to tell why a policy reads what it reads.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct CopyCounts {
    /// Bytes copied from a peer node instead of the shared storage.
    pub peer_bytes: f64,
    /// Bytes streamed by jobs whose dataset is larger than a cache.
    pub streamed_bytes: f64,
    /// Jobs that streamed their dataset.
    pub streamed_jobs: u64,
    /// Bytes read from the shared storage by prefetches.
    pub prefetch_bytes: f64,
    /// Prefetches a job then used on that node.
    pub prefetches_used: u64,
    /// Prefetched datasets evicted before any job used them.
    pub prefetches_evicted_unused: u64,
    /// Prefetches whose job was placed on another node.
    pub prefetches_elsewhere: u64,
    /// Prefetches stopped in flight because their job went elsewhere.
    pub prefetches_cancelled: u64,
    /// Copies into a node's cache that completed (stages and prefetches, from the shared
    /// storage or a peer).
    #[serde(default)]
    pub completed: u64,
    /// Evictions of complete datasets.
    pub evictions: u64,
    /// Evictions of data a queued job reads.
    pub evictions_of_queued_data: u64,
}

/// One user's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserFigures {
    /// The user.
    pub user: String,
    /// Jobs that ran.
    pub jobs: usize,
    /// GPU-hours held.
    pub gpu_hours: f64,
    /// Credits charged: GPU-hours times the GPU type's weight.
    pub credits: f64,
    /// Mean wait for GPUs, seconds.
    pub mean_wait_s: f64,
    /// Mean slowdown: completion time over run time.
    pub mean_slowdown: f64,
}

/// One policy's results. Field names are stable, for scripts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimReport {
    /// The policy.
    pub policy: String,
    /// Jobs that ran.
    pub jobs: usize,
    /// Trace jobs larger than any node, not run.
    pub rejected: usize,
    /// Jobs that had not ended when the run stopped (0 unless something is wrong).
    pub unfinished: usize,
    /// First submit to last end, seconds.
    pub makespan_s: f64,
    /// Mean wait from submit until the job holds its GPUs, seconds.
    pub mean_wait_s: f64,
    /// Median wait, seconds.
    pub p50_wait_s: f64,
    /// 95th-percentile wait, seconds.
    pub p95_wait_s: f64,
    /// Mean job completion time (submit to end), seconds.
    pub mean_jct_s: f64,
    /// Median completion time, seconds.
    pub p50_jct_s: f64,
    /// 95th-percentile completion time, seconds.
    pub p95_jct_s: f64,
    /// GPU allocation utilisation: GPU-time held over GPU-time available in the makespan.
    pub gpu_util: f64,
    /// GPU allocation utilisation while some job waited: what caps and fragmentation leave
    /// idle with demand (1 when no job ever waited).
    #[serde(default)]
    pub gpu_util_with_demand: f64,
    /// GPU compute utilisation: GPU-time held with the data there (not waiting for it).
    pub gpu_compute_util: f64,
    /// Jobs that ran past their time limit (the simulator lets them finish; a real pool would
    /// have ended them as TIMEOUT).
    pub overran: usize,
    /// Bytes read from shared storage.
    pub shared_bytes: f64,
    /// Share of dataset needs already complete on the node when the job was placed.
    pub cache_hit_rate: f64,
    /// GPU-seconds held while waiting for data.
    pub data_wait_gpu_s: f64,
    /// Jain's fairness index over the users' mean slowdowns (1: all equal).
    pub fairness_jain: f64,
    /// Preemptions carried out.
    #[serde(default)]
    pub preemptions: u64,
    /// Share of all GPU time held that preemption lost (notice to stop).
    #[serde(default)]
    pub preempt_lost_share: f64,
    /// Median wait of returning owners' jobs (their account within its share, with nothing
    /// waiting, when submitted) until first given GPUs, seconds.
    #[serde(default)]
    pub p50_owner_wait_s: f64,
    /// 95th-percentile wait of returning owners' jobs, seconds.
    #[serde(default)]
    pub p95_owner_wait_s: f64,
    /// What the copies were for: peers, streams, prefetches and evictions.
    #[serde(default)]
    pub copies: CopyCounts,
    /// Per user.
    pub users: Vec<UserFigures>,
    /// Where and when each job ran, by trace id (`labpool sim --placements` prints them).
    #[serde(skip)]
    pub placements: Vec<Placed>,
}

/// Where and when one job ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placed {
    /// Its id in the trace.
    pub job: u64,
    /// The node it ran on.
    pub node: String,
    /// Given its GPUs, seconds from the start of the trace.
    pub placed_s: f64,
    /// Its data there and its script started, seconds from the start of the trace.
    pub compute_s: f64,
    /// Ended, seconds from the start of the trace.
    pub end_s: f64,
    /// The time limit it was submitted with, seconds.
    pub limit_s: Option<i64>,
}

fn secs(a: Timestamp, b: Timestamp) -> f64 {
    (b.0 - a.0) as f64 / 1000.0
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The value at quantile `q` (nearest rank) of `v`.
pub(crate) fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// Builds the report from the finished jobs.
pub fn summarise(policy: &str, records: &[JobRecord], t: Totals) -> SimReport {
    let waits: Vec<f64> = records.iter().map(|r| secs(r.submit, r.placed)).collect();
    let jcts: Vec<f64> = records.iter().map(|r| secs(r.submit, r.end)).collect();
    let first = records.iter().map(|r| r.submit).min().unwrap_or_default();
    let last = records.iter().map(|r| r.end).max().unwrap_or_default();
    let makespan = secs(first, last);
    let held: f64 = records
        .iter()
        .map(|r| r.gpus as f64 * r.part * secs(r.placed, r.end))
        .sum::<f64>()
        + t.preempted_held_gpu_s;
    let waits_of = |f: &dyn Fn(&JobRecord) -> bool| -> Vec<f64> {
        records
            .iter()
            .filter(|r| f(r))
            .map(|r| secs(r.submit, r.first_placed))
            .collect()
    };
    let owner_waits = waits_of(&|r| r.within_share);
    let data_wait: f64 = records
        .iter()
        .map(|r| r.gpus as f64 * r.part * secs(r.placed, r.compute))
        .sum();
    let weights = sim_credit_weights();
    let mut per_user: BTreeMap<&str, Vec<&JobRecord>> = BTreeMap::new();
    for r in records {
        per_user.entry(&r.user).or_default().push(r);
    }
    let users: Vec<UserFigures> = per_user
        .iter()
        .map(|(user, rs)| {
            let gpu_hours: f64 = rs
                .iter()
                .map(|r| r.gpus as f64 * r.part * secs(r.placed, r.end) / 3600.0)
                .sum();
            let credits: f64 = rs
                .iter()
                .map(|r| {
                    r.gpus as f64 * r.part * secs(r.placed, r.end) / 3600.0
                        * weights.get(&r.gpu_type).copied().unwrap_or(1.0)
                })
                .sum();
            let waits: Vec<f64> = rs.iter().map(|r| secs(r.submit, r.placed)).collect();
            let slowdowns: Vec<f64> = rs
                .iter()
                .map(|r| secs(r.submit, r.end) / secs(r.compute, r.end).max(1.0))
                .collect();
            UserFigures {
                user: user.to_string(),
                jobs: rs.len(),
                gpu_hours,
                credits,
                mean_wait_s: mean(&waits),
                mean_slowdown: mean(&slowdowns),
            }
        })
        .collect();
    let x: Vec<f64> = users.iter().map(|u| u.mean_slowdown).collect();
    let jain = if x.is_empty() {
        1.0
    } else {
        let sum: f64 = x.iter().sum();
        let sq: f64 = x.iter().map(|v| v * v).sum();
        if sq == 0.0 {
            1.0
        } else {
            sum * sum / (x.len() as f64 * sq)
        }
    };
    SimReport {
        policy: policy.to_string(),
        jobs: records.len(),
        rejected: t.rejected,
        unfinished: t.unfinished,
        makespan_s: makespan,
        mean_wait_s: mean(&waits),
        p50_wait_s: quantile(&waits, 0.5),
        p95_wait_s: quantile(&waits, 0.95),
        mean_jct_s: mean(&jcts),
        p50_jct_s: quantile(&jcts, 0.5),
        p95_jct_s: quantile(&jcts, 0.95),
        gpu_util: if makespan > 0.0 {
            held / (t.total_gpus as f64 * makespan)
        } else {
            0.0
        },
        gpu_util_with_demand: if t.demand_gpu_s > 0.0 {
            t.held_with_demand_gpu_s / t.demand_gpu_s
        } else {
            1.0
        },
        gpu_compute_util: if makespan > 0.0 {
            (held - data_wait) / (t.total_gpus as f64 * makespan)
        } else {
            0.0
        },
        overran: records
            .iter()
            .filter(|r| r.limit_ms.is_some_and(|l| r.end.0 - r.placed.0 > l))
            .count(),
        shared_bytes: t.shared_bytes,
        cache_hit_rate: if t.needs == 0 {
            1.0
        } else {
            t.hits as f64 / t.needs as f64
        },
        data_wait_gpu_s: data_wait,
        fairness_jain: jain,
        preemptions: t.preemptions,
        preempt_lost_share: if held > 0.0 { t.lost_gpu_s / held } else { 0.0 },
        p50_owner_wait_s: quantile(&owner_waits, 0.5),
        p95_owner_wait_s: quantile(&owner_waits, 0.95),
        copies: t.copies,
        users,
        placements: placements(records),
    }
}

/// Each job's node and times, in trace order.
fn placements(records: &[JobRecord]) -> Vec<Placed> {
    let mut out: Vec<Placed> = records
        .iter()
        .map(|r| Placed {
            job: r.job,
            node: r.node.clone(),
            placed_s: r.placed.0 as f64 / 1000.0,
            compute_s: r.compute.0 as f64 / 1000.0,
            end_s: r.end.0 as f64 / 1000.0,
            limit_s: r.limit_ms.map(|l| l / 1000),
        })
        .collect();
    out.sort_by_key(|p| p.job);
    out
}

/// The rows that compare strict caps with borrowing: what preemption cost, and how long
/// owners waited.
fn preemption_rows() -> Vec<(&'static str, Measure)> {
    let mins = |s: f64| format!("{:.1} min", s / 60.0);
    vec![
        (
            "preemptions",
            Box::new(|r: &SimReport| (r.preemptions as f64, r.preemptions.to_string())),
        ),
        (
            "GPU time lost to preemption",
            Box::new(|r: &SimReport| {
                (
                    r.preempt_lost_share,
                    format!("{:.2}%", r.preempt_lost_share * 100.0),
                )
            }),
        ),
        (
            "p50 wait, returning owners' jobs",
            Box::new(move |r: &SimReport| (r.p50_owner_wait_s, mins(r.p50_owner_wait_s))),
        ),
        (
            "p95 wait, returning owners' jobs",
            Box::new(move |r: &SimReport| (r.p95_owner_wait_s, mins(r.p95_owner_wait_s))),
        ),
    ]
}

/// How a table row reads a report: the value compared, and its text.
type Measure = Box<dyn Fn(&SimReport) -> (f64, String)>;

/// The reports side by side as an aligned text table, with each policy's change against the
/// first one.
pub fn table(reports: &[SimReport]) -> String {
    let Some(base) = reports.first() else {
        return String::new();
    };
    let hours = |s: f64| format!("{:.1} h", s / 3600.0);
    let rows: Vec<(&str, Measure)> = vec![
        (
            "jobs run (rejected)",
            Box::new(|r: &SimReport| (r.jobs as f64, format!("{} ({})", r.jobs, r.rejected))),
        ),
        (
            "makespan",
            Box::new(move |r: &SimReport| (r.makespan_s, hours(r.makespan_s))),
        ),
        (
            "mean wait",
            Box::new(move |r: &SimReport| (r.mean_wait_s, hours(r.mean_wait_s))),
        ),
        (
            "p50 wait",
            Box::new(move |r: &SimReport| (r.p50_wait_s, hours(r.p50_wait_s))),
        ),
        (
            "p95 wait",
            Box::new(move |r: &SimReport| (r.p95_wait_s, hours(r.p95_wait_s))),
        ),
        (
            "mean completion time",
            Box::new(move |r: &SimReport| (r.mean_jct_s, hours(r.mean_jct_s))),
        ),
        (
            "p95 completion time",
            Box::new(move |r: &SimReport| (r.p95_jct_s, hours(r.p95_jct_s))),
        ),
        (
            "GPU allocation utilisation",
            Box::new(|r: &SimReport| (r.gpu_util, format!("{:.1}%", r.gpu_util * 100.0))),
        ),
        (
            "GPU allocation utilisation while jobs wait",
            Box::new(|r: &SimReport| {
                (
                    r.gpu_util_with_demand,
                    format!("{:.1}%", r.gpu_util_with_demand * 100.0),
                )
            }),
        ),
        (
            "GPU compute utilisation",
            Box::new(|r: &SimReport| {
                (
                    r.gpu_compute_util,
                    format!("{:.1}%", r.gpu_compute_util * 100.0),
                )
            }),
        ),
        (
            "bytes read from shared storage",
            Box::new(|r: &SimReport| {
                (
                    r.shared_bytes,
                    labpool_units::format_size(r.shared_bytes as u64),
                )
            }),
        ),
        (
            "cache hit rate",
            Box::new(|r: &SimReport| {
                (
                    r.cache_hit_rate,
                    format!("{:.1}%", r.cache_hit_rate * 100.0),
                )
            }),
        ),
        (
            "GPU time waiting for data",
            Box::new(|r: &SimReport| {
                (
                    r.data_wait_gpu_s,
                    format!("{:.1} GPU-h", r.data_wait_gpu_s / 3600.0),
                )
            }),
        ),
        (
            "fairness (Jain, slowdown)",
            Box::new(|r: &SimReport| (r.fairness_jain, format!("{:.3}", r.fairness_jain))),
        ),
        (
            "jobs past their time limit",
            Box::new(|r: &SimReport| (r.overran as f64, r.overran.to_string())),
        ),
    ];
    let mut rows = rows;
    if reports
        .iter()
        .any(|r| r.preemptions > 0 || r.p95_owner_wait_s > 0.0)
    {
        rows.extend(preemption_rows());
    }
    let mut lines = Vec::new();
    let mut header = vec!["measure".to_string()];
    header.extend(reports.iter().map(|r| r.policy.clone()));
    lines.push(header);
    for (name, f) in &rows {
        let mut line = vec![name.to_string()];
        let (b, _) = f(base);
        for (i, r) in reports.iter().enumerate() {
            let (v, text) = f(r);
            if i == 0 || b == 0.0 {
                line.push(text);
            } else {
                line.push(format!("{text} ({:+.0}%)", (v - b) / b * 100.0));
            }
        }
        lines.push(line);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    lines
        .iter()
        .map(|l| {
            l.iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The per-user figures of one report as an aligned text table.
pub fn user_table(report: &SimReport) -> String {
    let mut out = format!(
        "{:<6} {:>5} {:>10} {:>10} {:>10} {:>9}\n",
        "user", "jobs", "GPU-hours", "credits", "mean wait", "slowdown"
    );
    for u in &report.users {
        out.push_str(&format!(
            "{:<6} {:>5} {:>10.0} {:>10.0} {:>8.1} h {:>9.2}\n",
            u.user,
            u.jobs,
            u.gpu_hours,
            u.credits,
            u.mean_wait_s / 3600.0,
            u.mean_slowdown
        ));
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_means() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 0.95), 5.0);
        assert_eq!(mean(&v), 3.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
