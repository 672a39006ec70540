//! `GET /v1/doctor` (admins): gathers what `labpool_monitor::doctor` judges: nodes, the queue,
//! disks, GPU health from the last samples, zombies, clocks, the GPUs NVML reports against
//! those the pool schedules, snapshot runs, quotas, isolation and the shared mounts.

use crate::api::NodeView;
use crate::api::alerts::{DoctorQuery, DoctorReport};
use crate::engine::request::Request;
use crate::error::ApiError;
use crate::http::{AppState, Peer, admin_only, ask, caller};
use axum::Json;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use labpool_monitor::doctor::{
    Facts, GpuFact, JobFact, Limits, NodeFact, QuotaFact, Service, SnapshotFact, check, mounts_for,
};
use labpool_scheduler::JobState;

/// Runs the checklist.
pub async fn doctor(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    query: Result<Query<DoctorQuery>, QueryRejection>,
) -> Result<Json<DoctorReport>, ApiError> {
    let c = caller(&state, &peer)?;
    admin_only(&state.config, &c, "run the doctor")?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text(), None))?;
    let config = &state.config;
    let limits = Limits {
        waiting_ms: (q.waiting_hours.unwrap_or(24.0) * 3_600_000.0) as i64,
        running_ms: (q.running_days.unwrap_or(7.0) * 86_400_000.0) as i64,
        disk_percent: config.alerts.disk_percent,
        temp_c: config.alerts.gpu_temp_celsius as u32,
        skew_s: config.alerts.clock_skew_seconds,
        snapshot_max_age_ms: config.alerts.snapshot_max_age.as_millis() as i64,
        ..Limits::default()
    };
    let nodes = ask(&state, |reply| Request::Nodes { reply }).await?;
    let facts = facts(&state, &nodes).await?;
    let mut findings = check(&facts, &limits);
    if let Some(problem) = crate::identity::admin_group_problem(&config.controller.admin_group) {
        findings.push(labpool_monitor::doctor::Finding {
            check: "admins".into(),
            status: labpool_monitor::doctor::Status::Warn,
            subject: config.controller.admin_group.clone(),
            what: problem,
            fix: "create the group, or set [controller] admin_group to one that exists".into(),
        });
    }
    if config.executor.kind == crate::settings::ExecutorKind::Slurm {
        findings.extend(crate::slurm_gate::doctor::check(config, &agent_gpus(&nodes)).await);
    }
    Ok(Json(DoctorReport { findings }))
}

/// The GPUs of each node an agent serves, by type, and the nodes whose cards it shares (slices,
/// `gpu_share`).
fn agent_gpus(nodes: &[NodeView]) -> crate::slurm_gate::doctor::AgentNodes {
    let mut out = crate::slurm_gate::doctor::AgentNodes::default();
    for n in nodes.iter().filter(|n| n.agent.is_some()) {
        let gpus = out.gpus.entry(n.name.clone()).or_default();
        for g in &n.gpus {
            match gpus.iter_mut().find(|(t, _)| *t == g.gpu_type) {
                Some((_, c)) => *c += 1,
                None => gpus.push((g.gpu_type.clone(), 1)),
            }
        }
        if n.gpus.iter().any(|g| g.share > 1 || !g.slices.is_empty()) {
            out.sliced.insert(n.name.clone());
        }
    }
    out
}

async fn facts(state: &AppState, nodes: &[NodeView]) -> Result<Facts, ApiError> {
    let config = state.config.clone();
    let jobs = state.db.active_jobs(None).await?;
    let library = crate::discovery::nvml_library(config.node.nvml_library.as_deref());
    let local_nvml = if config.controller.local_node {
        tokio::task::spawn_blocking(move || crate::discovery::nvml_gpus(library.as_deref()))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|g| g.len() as u32)
    } else {
        None
    };
    let quotas = state.quotas.report().await.unwrap_or_default();
    let monitor = &state.monitor;
    let now = monitor.clock.now_ms();
    let mut facts = Facts {
        now_ms: now,
        controller_version: crate::api::versions::THIS.to_string(),
        service: service(),
        ..Facts::default()
    };
    {
        let inner = monitor.lock();
        for n in nodes {
            // A node without NVML sends samples too (its jobs' memory): no GPUs in them.
            let sampled = inner
                .samples
                .get(&n.name)
                .map(|(s, _)| s.gpus.len() as u32)
                .filter(|n| *n > 0);
            facts.nodes.push(NodeFact {
                name: n.name.clone(),
                state: n.state_text(),
                reason: n.reason.clone(),
                isolation: n.isolation.clone(),
                gpus_scheduled: n.gpus.len() as u32,
                gpus_nvml: if n.agent.is_none() {
                    local_nvml
                } else {
                    sampled
                },
                skew_ms: inner.skew_ms.get(&n.name).copied(),
                agent_version: n.agent_version.clone(),
            });
        }
        for (node, (sample, _)) in &inner.samples {
            for g in &sample.gpus {
                facts.gpus.push(GpuFact {
                    node: node.clone(),
                    index: g.index,
                    temp_c: g.temp_c,
                    ecc_dbe: g.ecc.dbe_volatile,
                    ecc_sbe_aggregate: g.ecc.sbe_aggregate,
                    retired_pages: g.retired_pages,
                    xid: g.xid.as_ref().map(|x| x.last),
                });
            }
        }
        for (job, (kind, since)) in &inner.zombies {
            let user = inner
                .running
                .get(job)
                .map(|r| r.user.clone())
                .unwrap_or_default();
            facts
                .zombies
                .push((*job, user, kind.as_str().to_string(), *since));
        }
        for r in inner.running.values() {
            if inner.zombies.contains_key(&r.job) {
                continue;
            }
            if let Some(since) = inner
                .usage
                .get(&(r.job, r.attempt))
                .and_then(|u| u.low_since_ms)
                .filter(|s| now - s > 3_600_000)
            {
                facts.low_use.push((r.job, r.user.clone(), since));
            }
        }
    }
    for j in &jobs {
        let fact = |since_ms: i64| JobFact {
            id: j.id,
            user: j.spec.user.clone(),
            since_ms,
            reason: j.reason.clone(),
        };
        match j.state {
            JobState::Pending => facts.waiting.push(fact(j.spec.submit_time.0)),
            JobState::Running => facts.running.push(fact(j.start_time.unwrap_or(now))),
            _ => {}
        }
    }
    facts.disks = super::observe::disks(&config)
        .into_iter()
        .map(|(p, v)| (p.display().to_string(), v))
        .collect();
    for run in crate::snapshots::service::runs(&config) {
        facts.snapshots.push(SnapshotFact {
            last_ok_ms: run.last_ok_ms,
            failure: run.failure.map(|f| f.why),
            source: run.name,
        });
    }
    for u in &quotas {
        for fs in &u.filesystems {
            if let Some(p) = fs.percent {
                facts.quotas.push(QuotaFact {
                    user: u.user.clone(),
                    fs: fs.fs.clone(),
                    percent: p,
                });
            }
        }
    }
    let mut paths = vec![(
        "datasets".to_string(),
        config.datasets.root.display().to_string(),
    )];
    if let Ok(fs) = config.quota_filesystems() {
        paths.extend(
            fs.into_iter()
                .map(|f| (f.name, f.root.display().to_string())),
        );
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    facts.mounts = mounts_for(&mounts, &paths);
    Ok(facts)
}

/// How this controller was started: systemd sets `INVOCATION_ID` for the processes of a unit,
/// and the unit's name is the last part of the process's cgroup path.
fn service() -> Service {
    if !std::path::Path::new("/run/systemd/system").is_dir() {
        return Service::NoSystemd;
    }
    if std::env::var_os("INVOCATION_ID").is_none() {
        return Service::OutsideSystemd;
    }
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let unit = cgroups
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|u| u.ends_with(".service"))
        .unwrap_or("labpool.service")
        .to_string();
    // Enabled: linked into a target's wants, where `systemctl enable` puts it.
    let enabled = ["/etc/systemd/system", "/lib/systemd/system"]
        .iter()
        .any(|dir| {
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries.flatten().any(|e| {
                    e.file_name().to_string_lossy().ends_with(".wants")
                        && e.path().join(&unit).exists()
                })
            })
        });
    Service::Unit { unit, enabled }
}
