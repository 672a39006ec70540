//! The values the alert rules are evaluated on, measured now: each GPU's temperature and ECC
//! double-bit count, each node's silence, each disk's fill, each agent's clock skew, and each
//! running job's zombie state (which also feeds the zombie ladder).

use super::MonitorService;
use labpool_monitor::alerts::Observation;
use labpool_monitor::alerts::rules::names;
use labpool_monitor::zombie::find;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Every observation for this tick; records the zombies found on the service.
pub fn observations(service: &MonitorService) -> Vec<Observation> {
    let now = service.clock.now_ms();
    let config = &service.config;
    let fresh_ms = (config.metrics.sample_interval.as_millis() as i64 * 3).max(30_000);
    let zombie_rules = config.zombies.rules();
    let mut out = Vec::new();
    let obs =
        |rule: &str, subject: String, value: f64, text: String, user: Option<String>| Observation {
            rule: rule.to_string(),
            subject,
            value,
            text,
            user,
        };
    let mut inner = service.lock();
    let inner = &mut *inner;
    for (node, (sample, got)) in &inner.samples {
        if now - got > fresh_ms {
            continue;
        }
        for g in &sample.gpus {
            let subject = format!("{node}/gpu{}", g.index);
            if let Some(t) = g.temp_c {
                out.push(obs(
                    names::GPU_TEMPERATURE,
                    subject.clone(),
                    f64::from(t),
                    format!(
                        "GPU {} of {node} is at {t} °C (alert at {} °C); check its fans and the room's cooling, and drain the node if it stays hot",
                        g.index, config.alerts.gpu_temp_celsius
                    ),
                    None,
                ));
            }
            if let Some(dbe) = g.ecc.dbe_volatile {
                out.push(obs(
                    names::ECC_DBE,
                    subject,
                    dbe as f64,
                    format!(
                        "GPU {} of {node} has {dbe} double-bit ECC errors since the driver loaded; drain the node (`labpool node drain {node}`) and have the card checked",
                        g.index
                    ),
                    None,
                ));
            }
        }
    }
    for n in &inner.nodes {
        let silent_s = n
            .last_seen
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or(0.0, |t| (now - t.timestamp_millis()).max(0) as f64 / 1000.0);
        out.push(obs(
            names::NODE_LOST,
            n.name.clone(),
            silent_s,
            format!(
                "node {} has not been heard from for {:.0} s; check that its agent runs (`labpool agent`) and that it reaches the controller",
                n.name, silent_s
            ),
            None,
        ));
    }
    for (node, skew) in &inner.skew_ms {
        let s = (*skew as f64 / 1000.0).abs();
        out.push(obs(
            names::CLOCK_SKEW,
            node.clone(),
            s,
            format!(
                "the clock of node {node} is {:+.1} s from the controller's; run chrony or ntpd on both",
                *skew as f64 / 1000.0
            ),
            None,
        ));
    }
    for (path, percent) in disks(config) {
        out.push(obs(
            names::DISK_FULL,
            path.display().to_string(),
            percent,
            format!(
                "{} is {percent:.0}% full (alert at {}%); free space or grow it before writes fail",
                path.display(),
                config.alerts.disk_percent
            ),
            None,
        ));
    }
    for run in crate::snapshots::service::runs(config) {
        let name = run.name;
        out.push(obs(
            names::SNAPSHOT_FAILED,
            format!("snapshot {name}"),
            if run.failure.is_some() { 1.0 } else { 0.0 },
            match &run.failure {
                Some(f) => format!(
                    "the snapshot of {name} failed at {}: {}; it is tried again every 5 minutes; `labpool snapshot check` tells whether the repository is sound",
                    f.at.to_rfc3339(),
                    f.why
                ),
                None => format!("the snapshot of {name} succeeded again"),
            },
            None,
        ));
        if let Some(t) = run.last_ok_ms {
            let age_s = (now - t).max(0) as f64 / 1000.0;
            out.push(obs(
                names::SNAPSHOT_STALE,
                format!("snapshot {name}"),
                age_s,
                format!(
                    "the last snapshot of {name} is {} old; check the controller log for why the nightly run did not happen",
                    labpool_units::format_duration(std::time::Duration::from_secs(age_s as u64))
                ),
                None,
            ));
        }
    }
    for (user, fs, used, hard) in &inner.extras.0.quotas {
        let Some(hard) = hard.filter(|h| *h > 0) else {
            continue;
        };
        let percent = 100.0 * *used as f64 / hard as f64;
        out.push(obs(
            names::QUOTA_HARD,
            format!("{user} on {fs}"),
            percent,
            format!(
                "{user} uses {percent:.0}% of their hard limit on {fs}: new jobs are refused until they free space (`labpool quota` shows where it went)"
            ),
            Some(user.clone()),
        ));
    }
    inner.zombies.clear();
    for r in inner.running.values() {
        let Some(u) = inner.usage.get(&(r.job, r.attempt)) else {
            continue;
        };
        let gone: Vec<i64> = inner
            .rank_gone
            .iter()
            .filter(|((job, _), _)| *job == r.job)
            .map(|(_, since)| *since)
            .collect();
        let rank_gone = (!gone.is_empty() && gone.len() < r.gpus.len())
            .then(|| gone.iter().min().copied())
            .flatten();
        let found = find(u, rank_gone, now, &zombie_rules);
        if let Some(f) = found {
            inner.zombies.insert(r.job, f);
        }
        out.push(obs(
            names::ZOMBIE,
            format!("job {}", r.job),
            if found.is_some() { 1.0 } else { 0.0 },
            match found {
                Some((kind, _)) => format!(
                    "job {} of {} holds GPUs it does not use: {}; cancel it if it is stuck (`labpool cancel {}`)",
                    r.job,
                    r.user,
                    kind.describe(&zombie_rules),
                    r.job
                ),
                None => format!("job {} uses its GPUs again", r.job),
            },
            Some(r.user.clone()),
        ));
    }
    out
}

/// The pool's disks and how full each is, percent: state, cache, quota roots (home, scratch)
/// and the snapshot repository. Paths that do not exist are skipped.
pub(crate) fn disks(config: &crate::settings::Config) -> BTreeMap<PathBuf, f64> {
    let mut paths = vec![config.controller.state_dir.clone(), config.cache_dir()];
    if let Ok(fs) = config.quota_filesystems() {
        paths.extend(fs.into_iter().map(|f| f.root));
    }
    if let Some(repo) = &config.snapshots.repo {
        paths.push(repo.clone());
    }
    paths
        .into_iter()
        .filter_map(|p| {
            let s = nix::sys::statvfs::statvfs(&p).ok()?;
            let total = s.blocks() as f64 * s.fragment_size() as f64;
            let avail = s.blocks_available() as f64 * s.fragment_size() as f64;
            let free = s.blocks_free() as f64 * s.fragment_size() as f64;
            // As df counts it: used over what users can have.
            let used = total - free;
            (total > 0.0).then(|| (p, 100.0 * used / (used + avail).max(1.0)))
        })
        .collect()
}
