//! `labpool sim --from-history`: the jobs the pool ran in a month, with their real submit times,
//! sizes, datasets and run times, replayed through the daemon's own scheduler and lifecycle
//! (the simulator's `labpool` policy) on today's pool, and on a proposed one (`--nodes +2x8`),
//! next to the waits they really had: the figure a funding application needs.
//!
//! The simulator times jobs per GPU type from a trace's columns; a history has one run time per
//! job, so every GPU type is taken as equally fast (the question is how many GPUs, not which).

use crate::api::JobView;
use crate::api::data::DatasetView;
use crate::args::SimArgs;
use crate::client::Client;
use crate::settings::Config;
use anyhow::Context;
use labpool_sim::config::{ClusterSpec, NodeGroup};
use labpool_sim::report::table;
use labpool_sim::trace::TraceJob;
use labpool_sim::{SimInput, SimPolicy, simulate};
use labpool_units::{parse_rate, parse_size};
use std::collections::BTreeMap;
use std::path::Path;

/// The dataset name a job without one is given in the replay (0 bytes).
const NO_DATASET: &str = "-";

/// `--nodes` in history mode: `+2x8[:TYPE]` adds to today's pool; anything else but the
/// default replaces it.
fn proposed(spec: &str) -> anyhow::Result<Option<Vec<NodeGroup>>> {
    let Some(add) = spec.strip_prefix('+') else {
        return Ok(None);
    };
    add.split(',')
        .map(|g| {
            let counts = g.split(':').next().unwrap_or(g);
            let (n, gpus) = counts
                .split_once('x')
                .and_then(|(n, g)| Some((n.parse::<u32>().ok()?, g.parse::<u32>().ok()?)))
                .filter(|(n, g)| *n > 0 && (1..=64).contains(g))
                .with_context(|| {
                    format!("--nodes {spec:?}: give +COUNTxGPUS[:TYPE], e.g. +2x8:a100")
                })?;
            Ok(NodeGroup {
                count: n,
                gpus,
                gpu_type: "v100".into(),
                slices: Vec::new(),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map(Some)
}

fn ms(t: Option<&str>) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(t?)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// A recorded wait percentile in seconds, by the report's nearest-rank method.
fn wait_s(sorted_ms: &[i64], q: f64) -> f64 {
    labpool_reports::compute::percentile(sorted_ms, q) as f64 / 1000.0
}

/// What a replay found: the jobs replayed, the waits they really had, and the simulator's
/// report for today's pool and, when `--nodes +…` was given, for the proposed one.
pub struct Replay {
    /// GPU jobs replayed.
    pub jobs: usize,
    /// (p50, p95) recorded wait, seconds.
    pub recorded_wait_s: (f64, f64),
    /// Today's pool, then the proposed one.
    pub reports: Vec<labpool_sim::report::SimReport>,
}

impl Replay {
    /// The report's what-if section, when a proposed pool was replayed.
    pub fn what_if(&self, added: &str) -> Option<labpool_reports::WhatIf> {
        let [today, proposed] = self.reports.as_slice() else {
            return None;
        };
        Some(labpool_reports::WhatIf {
            added: added.to_string(),
            jobs: self.jobs,
            recorded_wait_s: self.recorded_wait_s,
            today_wait_s: (today.p50_wait_s, today.p95_wait_s),
            proposed_wait_s: (proposed.p50_wait_s, proposed.p95_wait_s),
            util: (today.gpu_util, proposed.gpu_util),
        })
    }
}

/// Replays the GPU jobs submitted in [from, to) (`label` names the range in messages) on
/// today's pool and, with `args.nodes` as `+COUNTxGPUS`, on the pool with those nodes added.
pub async fn replay(
    args: &SimArgs,
    config: &Config,
    from: i64,
    to: i64,
    label: &str,
) -> anyhow::Result<Replay> {
    let client = Client::new(&config.controller.socket);
    let history = client.history(None, Some(from), usize::MAX).await?;
    let nodes: Vec<crate::api::NodeView> = client.get("/v1/nodes").await?;
    let datasets: Vec<DatasetView> = client.get("/v1/datasets").await.unwrap_or_default();
    let ran: Vec<(&JobView, i64, i64, i64)> = history
        .iter()
        .filter_map(|j| {
            let (s, st, e) = (
                ms(Some(&j.submit_time))?,
                ms(j.start_time.as_deref())?,
                ms(j.end_time.as_deref())?,
            );
            ((from..to).contains(&s) && j.gpus_requested > 0).then_some((j, s, st, e))
        })
        .collect();
    anyhow::ensure!(
        !ran.is_empty(),
        "no GPU job submitted in {label} ran to its end: nothing to replay (try another month)"
    );
    let mut sizes: BTreeMap<String, u64> =
        datasets.iter().map(|d| (d.name.clone(), d.bytes)).collect();
    sizes.insert(NO_DATASET.into(), 0);
    let jobs: Vec<TraceJob> = ran
        .iter()
        .map(|(j, s, st, e)| {
            let run_s = ((e - st) as f64 / 1000.0).max(1.0);
            TraceJob {
                job_id: j.id,
                submit_s: (s - from) as f64 / 1000.0,
                user: j.user.clone(),
                gpus: j.gpus_requested * j.node_count.max(1),
                dataset: j
                    .datasets
                    .first()
                    .filter(|d| sizes.contains_key(*d))
                    .cloned()
                    .unwrap_or_else(|| NO_DATASET.into()),
                job_type: j.name.clone(),
                dur_v100_s: Some(run_s),
                dur_p100_s: Some(run_s),
                dur_k80_s: Some(run_s),
                slice: match j.slice {
                    Some(labpool_scheduler::slice::Slice::Fraction(d)) => Some(d),
                    _ => None,
                },
            }
        })
        .collect();
    let mut recorded: Vec<i64> = ran.iter().map(|(_, s, st, _)| st - s).collect();
    recorded.sort_unstable();
    let mut today: BTreeMap<u32, u32> = BTreeMap::new();
    for n in nodes.iter().filter(|n| !n.gpus.is_empty()) {
        *today.entry(n.gpus.len() as u32).or_default() += 1;
    }
    let groups: Vec<NodeGroup> = today
        .into_iter()
        .map(|(gpus, count)| NodeGroup {
            count,
            gpus,
            gpu_type: "v100".into(),
            slices: Vec::new(),
        })
        .collect();
    let cluster = |groups: Vec<NodeGroup>| -> anyhow::Result<ClusterSpec> {
        Ok(ClusterSpec {
            groups,
            ssd_bytes: parse_size(&args.ssd)?,
            shared_bw: parse_rate(&args.shared_bw)?,
            ssd_bw: parse_rate(&args.ssd_bw)?,
            nic_bw: parse_rate(&args.nic_bw)?,
        })
    };
    let input = SimInput {
        jobs,
        datasets: sizes,
        cluster: cluster(groups.clone())?,
        horizon_s: args.horizon,
        seed: args.seed,
        daemon: config.policy(),
        accounts: Default::default(),
    };
    let mut reports = Vec::new();
    let mut now = simulate(&input, SimPolicy::Labpool)?;
    now.policy = "labpool, today's pool".into();
    reports.push(now);
    if let Some(add) = proposed(&args.nodes)? {
        let mut bigger = groups;
        bigger.extend(add);
        let with = SimInput {
            cluster: cluster(bigger)?,
            ..input.clone()
        };
        let mut r = simulate(&with, SimPolicy::Labpool)?;
        r.policy = format!("labpool, with {}", args.nodes);
        reports.push(r);
    }
    Ok(Replay {
        jobs: ran.len(),
        recorded_wait_s: (wait_s(&recorded, 0.5), wait_s(&recorded, 0.95)),
        reports,
    })
}

/// Runs `labpool sim --from-history`.
pub fn run(args: &SimArgs, config_path: Option<&Path>) -> anyhow::Result<()> {
    let config = Config::locate(config_path)?;
    let month = match &args.month {
        Some(m) => m.clone(),
        None => {
            let this = chrono::Local::now().format("%Y-%m").to_string();
            super::reports::month_before(&this)?
        }
    };
    let (from, to) = super::reports::month_range(&month)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let r = runtime.block_on(replay(args, &config, from, to, &month))?;
    let reports = r.reports;
    if args.json {
        let v = serde_json::json!({
            "month": month,
            "jobs": r.jobs,
            "recorded": { "p50_wait_s": r.recorded_wait_s.0, "p95_wait_s": r.recorded_wait_s.1 },
            "replays": reports,
        });
        crate::out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    crate::out!(
        "{} GPU jobs submitted in {month}, replayed with their real submit times and run times (every GPU type taken as equally fast)",
        r.jobs
    );
    crate::out!(
        "recorded: p50 wait {:.0} s, p95 wait {:.0} s",
        r.recorded_wait_s.0,
        r.recorded_wait_s.1
    );
    crate::out!("{}", table(&reports));
    Ok(())
}
