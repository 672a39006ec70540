//! The systemd units `labpool init --systemd` writes, for a controller and for a node agent:
//! `systemd-analyze verify` takes them without a word, and they end only the daemon on a stop
//! (`KillMode=process`), so that running jobs outlive a restart.

use crate::pool::{bin, have_root, have_tool};
use std::path::Path;
use std::process::Command;

/// `systemd-analyze verify UNIT`: (succeeded, what it said). The man pages its
/// `Documentation=` names are installed with the package (`labpool man-pages`), not here.
fn verify(unit: &Path) -> (bool, String) {
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(unit)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn init(args: &[&str]) -> String {
    let out = Command::new(bin()).arg("init").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "init {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn init_writes_units_that_systemd_analyze_verifies() {
    let test = "init_writes_units_that_systemd_analyze_verifies";
    if !have_root(test) || !have_tool(test, "systemd-analyze") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (ctrl, node, units) = (
        tmp.path().join("ctrl"),
        tmp.path().join("node"),
        tmp.path().join("units"),
    );
    let said = init(&[
        "--dir",
        ctrl.to_str().unwrap(),
        "--virtual-gpus",
        "1:t4",
        "--systemd",
        "--systemd-dir",
        units.to_str().unwrap(),
    ]);
    assert!(
        said.contains("systemctl daemon-reload && systemctl enable --now labpool.service"),
        "{said}"
    );
    init(&[
        "--dir",
        node.to_str().unwrap(),
        "--join",
        "127.0.0.1:7070",
        "--key",
        ctrl.join("cluster.key").to_str().unwrap(),
        "--virtual-gpus",
        "1:t4",
        "--systemd",
        "--systemd-dir",
        units.to_str().unwrap(),
    ]);
    let bin = std::fs::canonicalize(bin()).unwrap();
    for (unit, command, config) in [
        ("labpool.service", "serve", ctrl.join("labpool.toml")),
        ("labpool-agent.service", "agent", node.join("labpool.toml")),
    ] {
        let path = units.join(unit);
        let text = std::fs::read_to_string(&path).unwrap();
        let exec = format!(
            "ExecStart={} {command} --config {}",
            bin.display(),
            config.display()
        );
        for line in [exec.as_str(), "KillMode=process", "Restart=on-failure"] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} not in {unit}:\n{text}"
            );
        }
        // Jobs inherit the service's system-call filters through their shims.
        for filter in [
            "SystemCallArchitectures",
            "RestrictRealtime",
            "LockPersonality",
        ] {
            assert!(
                !text.contains(filter),
                "{filter} in {unit} would bind every job"
            );
        }
        let (ok, said) = verify(&path);
        assert!(ok && said.trim().is_empty(), "{unit}: {said}");

        // The check is a real one: a unit naming a binary that is not there fails it.
        let broken = units.join(format!("broken-{unit}"));
        std::fs::write(
            &broken,
            text.replace(&bin.display().to_string(), "/nonexistent/labpool"),
        )
        .unwrap();
        let (ok, said) = verify(&broken);
        assert!(
            !ok || !said.trim().is_empty(),
            "a missing binary passed: {said}"
        );
        std::fs::remove_file(&broken).unwrap();
    }
}

/// The cgroups `pid` is in, in the hierarchies a supervisor tracks services by: the named
/// `systemd` v1 one and cgroup v2 (`0::`), as `/proc/PID/cgroup` lists them.
fn tracked_cgroups(pid: u32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(":name=systemd:") || l.starts_with("0::"))
        .map(String::from)
        .collect()
}

/// A job's shim, and the job under it, leave the controller's cgroup: a supervisor that stops
/// the controller's whole cgroup (systemd's default `KillMode=control-group`) leaves them.
#[test]
fn a_jobs_shim_and_its_job_are_outside_the_controllers_cgroup() {
    let test = "a_jobs_shim_and_its_job_are_outside_the_controllers_cgroup";
    if !have_root(test) {
        return;
    }
    let mut pool = crate::pool::Pool::new("1:t4");
    pool.start();
    let id = pool.submit(&["--wrap", "sleep 30"]);
    pool.wait_for(id, std::time::Duration::from_secs(20), |j| {
        j["state"] == "RUNNING"
    });
    let serve = tracked_cgroups(pool.pid().unwrap());
    assert!(!serve.is_empty(), "no tracked hierarchy is mounted here");
    let mut shims = Vec::new();
    crate::pool::wait_until(
        std::time::Duration::from_secs(10),
        || {
            shims = crate::pool::shims_under(&pool.dir);
            !shims.is_empty()
        },
        || "no shim runs",
    );
    let shim = shims[0] as u32;
    let mut job = Vec::new();
    crate::pool::wait_until(
        std::time::Duration::from_secs(10),
        || {
            job = crate::pool::children_of(shim);
            !job.is_empty()
        },
        || "the shim has no job process",
    );
    for pid in std::iter::once(shim).chain(job) {
        let groups = tracked_cgroups(pid);
        for line in &groups {
            assert!(
                !serve.contains(line),
                "process {pid} shares the controller's cgroup {line}"
            );
        }
        assert!(
            groups.iter().all(|l| l.contains("/labpool/")),
            "{pid}: {groups:?}"
        );
    }
    pool.ok(&["cancel", &id.to_string()]);
}
