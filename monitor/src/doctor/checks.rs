//! The checks, in the checklist's order.

use super::{Facts, Finding, Limits, NFS_ADVICE, Status, nfs_problems};

pub(super) fn finding(
    check: &str,
    status: Status,
    subject: &str,
    what: String,
    fix: &str,
) -> Finding {
    Finding {
        check: check.to_string(),
        status,
        subject: subject.to_string(),
        what,
        fix: fix.to_string(),
    }
}

/// `3d 4h`, `5h 12m`, `40m`: labpool's duration, to its two largest units.
fn age(ms: i64) -> String {
    labpool_units::format_duration_approx(std::time::Duration::from_millis(ms.max(0) as u64))
}

/// Each check's findings; one `ok` finding for a check that found nothing.
pub fn check(f: &Facts, l: &Limits) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut section = |name: &str, found: Vec<Finding>, ok: String| {
        if found.is_empty() {
            out.push(finding(name, Status::Ok, "-", ok, ""));
        } else {
            out.extend(found);
        }
    };

    let nodes = f
        .nodes
        .iter()
        .filter(|n| {
            matches!(n.state.as_str(), "DOWN" | "DRAINED" | "DRAINING") || n.state.ends_with('*')
        })
        .map(|n| {
            let why = n.reason.as_deref().unwrap_or("no reason given");
            if n.state == "DOWN" {
                finding("nodes", Status::Fail, &n.name, format!("DOWN: {why}"),
                    "check that its agent runs (`labpool agent`) and reaches the controller; its jobs were requeued")
            } else if n.state.ends_with('*') {
                // The reason begins "not responding: ".
                finding("nodes", Status::Fail, &n.name, format!("{}, {why}", n.state),
                    "check that its agent runs and that the controller reaches it at the address `labpool nodes` shows; nothing new is placed there meanwhile")
            } else {
                finding("nodes", Status::Warn, &n.name, format!("{}: {why}", n.state),
                    "`labpool node resume NODE` when the maintenance is done")
            }
        })
        .collect();
    section(
        "nodes",
        nodes,
        format!("{} up", labpool_units::count(f.nodes.len() as u64, "node")),
    );

    let waiting = f
        .waiting
        .iter()
        .filter(|j| f.now_ms - j.since_ms > l.waiting_ms)
        .map(|j| {
            finding(
                "waiting",
                Status::Warn,
                &format!("job {}", j.id),
                format!(
                    "{}'s job has waited {} ({})",
                    j.user,
                    age(f.now_ms - j.since_ms),
                    j.reason.as_deref().unwrap_or("no reason")
                ),
                "`labpool why JOB` says what it waits for; it may ask for more than any node has",
            )
        })
        .collect();
    section(
        "waiting",
        waiting,
        format!("no job waiting over {}", age(l.waiting_ms)),
    );

    let disks = f
        .disks
        .iter()
        .filter(|(_, p)| *p >= l.disk_percent)
        .map(|(path, p)| {
            finding(
                "disks",
                Status::Fail,
                path,
                format!("{p:.0}% full"),
                "free space (`labpool quota report`, `labpool purge scratch`) or grow the disk",
            )
        })
        .collect();
    let summary = f
        .disks
        .iter()
        .map(|(p, v)| format!("{p} {v:.0}%"))
        .collect::<Vec<_>>()
        .join(", ");
    section("disks", disks, summary);

    let mut gpus = Vec::new();
    for g in &f.gpus {
        let subject = format!("{}/gpu{}", g.node, g.index);
        if let Some(n) = g.ecc_dbe.filter(|n| *n > 0) {
            gpus.push(finding(
                "gpus",
                Status::Fail,
                &subject,
                format!("{n} double-bit ECC errors"),
                "drain the node and have the card checked; reset it with nvidia-smi -r when idle",
            ));
        }
        if let Some(t) = g.temp_c.filter(|t| *t >= l.temp_c) {
            gpus.push(finding(
                "gpus",
                Status::Warn,
                &subject,
                format!("{t} °C"),
                "check its fans and the room's cooling",
            ));
        }
        if let Some((s, d)) = g.retired_pages.filter(|(s, d)| s + d > 0) {
            gpus.push(finding(
                "gpus",
                Status::Warn,
                &subject,
                format!("{s} single-bit and {d} double-bit retired pages"),
                "plan to replace the card if the count grows",
            ));
        }
        if let Some(x) = g.xid {
            gpus.push(finding(
                "gpus",
                Status::Warn,
                &subject,
                format!("XID {x}"),
                "look the XID up in NVIDIA's table; many mean a driver or hardware fault",
            ));
        }
    }
    let scheduled: u32 = f.nodes.iter().map(|n| n.gpus_scheduled).sum();
    let healthy = if f.gpus.is_empty() {
        format!(
            "{}, none read by NVML (virtual GPUs, or no sample yet): no health to judge",
            labpool_units::count(u64::from(scheduled), "GPU")
        )
    } else {
        format!(
            "{} read by NVML, all healthy",
            labpool_units::count(f.gpus.len() as u64, "GPU")
        )
    };
    section("gpus", gpus, healthy);

    let long = f
        .running
        .iter()
        .filter(|j| f.now_ms - j.since_ms > l.running_ms)
        .map(|j| {
            finding(
                "running",
                Status::Warn,
                &format!("job {}", j.id),
                format!("{}'s job has run {}", j.user, age(f.now_ms - j.since_ms)),
                "ask its member whether it still makes progress",
            )
        })
        .collect();
    section(
        "running",
        long,
        format!("no job running over {}", age(l.running_ms)),
    );

    let mut zombies: Vec<Finding> = f
        .zombies
        .iter()
        .map(|(job, user, kind, since)| {
            finding(
                "zombies",
                Status::Warn,
                &format!("job {job}"),
                format!(
                    "{user}'s job is a zombie ({kind}) since {}",
                    age(f.now_ms - since)
                ),
                "`labpool cancel JOB` frees its GPUs; its member was told",
            )
        })
        .collect();
    zombies.extend(f.low_use.iter().map(|(job, user, since)| {
        finding(
            "zombies",
            Status::Ok,
            &format!("job {job}"),
            format!(
                "{user}'s job has been nearly idle for {} (a candidate)",
                age(f.now_ms - since)
            ),
            "",
        )
    }));
    section("zombies", zombies, "no zombie jobs".to_string());

    let skew = f
        .nodes
        .iter()
        .filter_map(|n| Some((n, n.skew_ms?)))
        .filter(|(_, s)| (*s as f64 / 1000.0).abs() >= l.skew_s)
        .map(|(n, s)| {
            finding(
                "clocks",
                Status::Warn,
                &n.name,
                format!(
                    "its clock is {:+.1} s from the controller's",
                    s as f64 / 1000.0
                ),
                "run chrony or ntpd on every node (`timedatectl set-ntp true; chronyc sources`)",
            )
        })
        .collect();
    section(
        "clocks",
        skew,
        "agents' clocks agree with the controller's".to_string(),
    );

    let config = f
        .nodes
        .iter()
        .filter_map(|n| Some((n, n.gpus_nvml?)))
        .filter(|(n, nvml)| n.gpus_scheduled != *nvml)
        .map(|(n, nvml)| {
            finding("config", Status::Fail, &n.name,
                format!("NVML reports {} but the pool schedules {}", labpool_units::count(u64::from(nvml), "GPU"), n.gpus_scheduled),
                "remove virtual_gpus from [node] so NVML's GPUs are used (or fix the count); GPUs the pool does not know are never given to jobs")
        })
        .collect();
    section(
        "config",
        config,
        "every node schedules the GPUs NVML reports".to_string(),
    );

    let mut snaps = Vec::new();
    for s in &f.snapshots {
        if let Some(why) = &s.failure {
            snaps.push(finding("snapshots", Status::Fail, &s.source, format!("the last run failed: {why}"),
                "see the controller log; `labpool snapshot check` tells whether the repository is sound"));
        }
        match s.last_ok_ms {
            Some(t) if f.now_ms - t > l.snapshot_max_age_ms => snaps.push(finding(
                "snapshots",
                Status::Warn,
                &s.source,
                format!("the last snapshot is {} old", age(f.now_ms - t)),
                "check its schedule and the controller log",
            )),
            None => snaps.push(finding(
                "snapshots",
                Status::Warn,
                &s.source,
                "no snapshot yet".to_string(),
                "`labpool snapshot create` takes one now",
            )),
            _ => {}
        }
    }
    section(
        "snapshots",
        snaps,
        format!("{} source(s) fresh", f.snapshots.len()),
    );

    let quotas = f
        .quotas
        .iter()
        .filter(|q| q.percent >= l.quota_percent)
        .map(|q| {
            let status = if q.percent >= 100.0 {
                Status::Warn
            } else {
                Status::Ok
            };
            finding(
                "quotas",
                status,
                &format!("{} on {}", q.user, q.fs),
                format!("{:.0}% of the limit", q.percent),
                "`labpool quota --user USER` shows where the space went",
            )
        })
        .collect();
    section("quotas", quotas, "nobody near a quota".to_string());

    let isolation = f
        .nodes
        .iter()
        .filter(|n| n.isolation.starts_with("none"))
        .map(|n| {
            finding("isolation", Status::Warn, &n.name, format!("no GPU isolation: {}", n.isolation),
                "run the agent as root on a kernel with cgroups, so a job cannot use GPUs it was not given")
        })
        .collect();
    section(
        "isolation",
        isolation,
        "GPU isolation on every node".to_string(),
    );

    let mounts = f
        .mounts
        .iter()
        .filter_map(|m| {
            let p = nfs_problems(m);
            (!p.is_empty()).then(|| {
                finding(
                    "mounts",
                    Status::Warn,
                    &m.target,
                    format!("{} ({}) is mounted with {}", m.role, m.fstype, p.join(", ")),
                    &format!("remount with {NFS_ADVICE} (in /etc/fstab)"),
                )
            })
        })
        .collect();
    let summary = f
        .mounts
        .iter()
        .map(|m| format!("{} on {} ({})", m.role, m.target, m.fstype))
        .collect::<Vec<_>>()
        .join(", ");
    section("mounts", mounts, summary);
    let (found, ok) = super::upkeep::versions(f);
    section("versions", found, ok);
    let (found, ok) = super::upkeep::service(f);
    section("service", found, ok);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{NodeFact, SnapshotFact};

    #[test]
    fn a_healthy_pool_gives_one_ok_per_check_and_faults_name_their_fix() {
        let ok = check(&Facts::default(), &Limits::default());
        assert_eq!(ok.len(), 14);
        assert!(ok.iter().all(|f| f.status == Status::Ok));
        let facts = Facts {
            now_ms: 100 * 3_600_000,
            nodes: vec![NodeFact {
                name: "n1".into(),
                state: "DOWN".into(),
                isolation: "none (not root)".into(),
                gpus_scheduled: 2,
                gpus_nvml: Some(4),
                skew_ms: Some(-9_000),
                ..NodeFact::default()
            }],
            disks: vec![("/srv/scratch".into(), 97.0)],
            snapshots: vec![SnapshotFact {
                source: "home".into(),
                last_ok_ms: Some(0),
                failure: None,
            }],
            ..Facts::default()
        };
        let found = check(&facts, &Limits::default());
        let bad: Vec<(&str, Status)> = found
            .iter()
            .filter(|f| f.status != Status::Ok)
            .map(|f| (f.check.as_str(), f.status))
            .collect();
        assert_eq!(
            bad,
            vec![
                ("nodes", Status::Fail),
                ("disks", Status::Fail),
                ("clocks", Status::Warn),
                ("config", Status::Fail),
                ("snapshots", Status::Warn),
                ("isolation", Status::Warn),
            ]
        );
        assert!(
            found
                .iter()
                .filter(|f| f.status != Status::Ok)
                .all(|f| !f.fix.is_empty())
        );
        assert!(
            found
                .iter()
                .any(|f| f.what == "NVML reports 4 GPUs but the pool schedules 2")
        );
        // The node's reason is shown once, not as "DOWN: DOWN: …".
        let down = found.iter().find(|f| f.check == "nodes").unwrap();
        assert_eq!(down.what, "DOWN: no reason given");
    }

    /// Six virtual GPUs with no NVML readings are not "0 GPU(s) healthy"; a node not
    /// responding is a failure.
    #[test]
    fn gpus_without_readings_are_not_called_healthy_and_a_silent_node_fails() {
        let node = |name: &str, state: &str| NodeFact {
            name: name.into(),
            state: state.into(),
            reason: Some("not responding: no heartbeat since 10:00:00".into()),
            gpus_scheduled: 3,
            ..NodeFact::default()
        };
        let facts = Facts {
            nodes: vec![node("a", "IDLE"), node("b", "IDLE*")],
            ..Facts::default()
        };
        let found = check(&facts, &Limits::default());
        let gpus = found.iter().find(|f| f.check == "gpus").unwrap();
        assert_eq!(
            gpus.what,
            "6 GPUs, none read by NVML (virtual GPUs, or no sample yet): no health to judge"
        );
        let nodes: Vec<(&str, Status, &str)> = found
            .iter()
            .filter(|f| f.check == "nodes")
            .map(|f| (f.subject.as_str(), f.status, f.what.as_str()))
            .collect();
        assert_eq!(
            nodes,
            [(
                "b",
                Status::Fail,
                "IDLE*, not responding: no heartbeat since 10:00:00"
            )]
        );
    }
}
