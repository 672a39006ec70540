//! The Debian package, the way an admin takes it: built from this tree (`scripts/build-deb`),
//! installed with `dpkg -i`, `labpool init` in the packaged layout, a controller and a node
//! agent started by their units' `ExecStart` lines, a job run, the state backed up off the box;
//! then everything removed (`dpkg --purge`, the disks wiped), installed again, restored from the
//! copy alone, and the job found in the history. The package installs beside a real Slurm
//! without shadowing its commands.

use crate::machine::{Machine, PACKAGED_DIRS};
use crate::nodes::free_port;
use crate::pool::{bin, for_tests, have_root, have_tool, wait_until};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const UNITS: [&str; 2] = [
    "/lib/systemd/system/labpool.service",
    "/lib/systemd/system/labpool-agent.service",
];

/// `dpkg ARGS`, waiting out another dpkg or apt (the Slurm testbed installs packages while the
/// suite runs) for up to five minutes.
fn dpkg(args: &[&str]) -> String {
    let mut said = String::new();
    wait_until(
        Duration::from_secs(300),
        || {
            let out = Command::new("dpkg").args(args).output().unwrap();
            said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.status.success() || said.contains("lock"),
                "dpkg {args:?}: {said}"
            );
            out.status.success()
        },
        || format!("dpkg {args:?} never got its lock"),
    );
    said
}

/// The package's files (not its directories), as dpkg lists them.
fn package_files() -> Vec<PathBuf> {
    let out = Command::new("dpkg")
        .args(["-L", "labpool"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .filter(|p| !p.is_dir())
        .collect()
}

/// Purges the package at the end, whatever happened.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "labpool"]).output();
    }
}

fn edit(path: &Path, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, f(text)).unwrap();
}

#[test]
fn the_package_installs_runs_a_job_and_a_pool_comes_back_from_its_backup_after_a_purge() {
    let test =
        "the_package_installs_runs_a_job_and_a_pool_comes_back_from_its_backup_after_a_purge";
    if !have_root(test)
        || !have_tool(test, "dpkg-deb")
        || !have_tool(test, "systemd-analyze")
        || !have_tool(test, "nsenter")
    {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("lp-")
        .tempdir_in("/tmp")
        .unwrap();
    let work = tmp.path();
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/build-deb"))
        .arg("--binary")
        .arg(bin())
        .arg("--out")
        .arg(work.join("deb"))
        .arg("--fast")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build-deb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // The test installs and purges the package on this host: never over an admin's install.
    let installed = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "labpool"])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&installed.stdout).contains("installed") {
        assert!(
            !crate::pool::strict(),
            "{test}: labpool is installed on this host; the test would purge it"
        );
        eprintln!("SKIPPED {test}: labpool is installed on this host");
        return;
    }
    let slurm_before = std::fs::canonicalize("/usr/bin/sbatch").ok();

    let _installed = Installed;
    let said = dpkg(&["-i", &deb]);
    let version = Command::new("/usr/bin/labpool")
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    assert_eq!(
        version.trim(),
        format!("labpool {}", labpool::api::versions::THIS)
    );
    let files = package_files();
    for part in [
        "/usr/bin/labpool",
        "/lib/systemd/system/labpool.service",
        "/usr/share/man/man1/labpool-sbatch.1.gz",
        "/usr/share/bash-completion/completions/labpool",
        "/usr/lib/labpool/slurm/bin/squeue",
    ] {
        assert!(
            files.iter().any(|f| f == Path::new(part)),
            "{part} not in {files:?}"
        );
    }
    // The packaged units, with their man pages installed now.
    for unit in UNITS {
        let out = Command::new("systemd-analyze")
            .args(["verify", unit])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{unit}: {said}"
        );
    }
    // Slurm's names never shadow a real Slurm: where the postinst found one, its sbatch stays
    // and no alternative is made; where it found none, sbatch is labpool's.
    let sbatch = std::fs::canonicalize("/usr/bin/sbatch").ok();
    if said.contains("a Slurm is here") {
        if let Some(real) = &slurm_before {
            assert_eq!(
                sbatch.as_ref(),
                Some(real),
                "the package replaced Slurm's sbatch"
            );
        }
        assert!(!Path::new("/var/lib/dpkg/alternatives/sbatch").exists());
    } else {
        assert_eq!(
            sbatch.as_deref(),
            Some(Path::new("/usr/bin/labpool")),
            "no Slurm was found, but sbatch is not labpool's: {said}"
        );
    }
    let squeue = Command::new("/usr/lib/labpool/slurm/bin/squeue")
        .arg("--usage")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&squeue.stdout).contains("labpool's squeue"),
        "labpool's squeue link does not run labpool"
    );
    assert!(
        Command::new("getent")
            .args(["group", "labpool-admins"])
            .status()
            .unwrap()
            .success()
    );

    // A controller and a node agent, each on its own machine, set up the packaged way.
    let port = free_port("127.0.0.1");
    let join = format!("127.0.0.1:{port}");
    let mut ctrl = Machine::boot(&work.join("ctrl"));
    ctrl.ok(&[
        "init",
        "--virtual-gpus",
        "1:t4",
        "--shared-root",
        "/var/lib/labpool/shared",
        "--listen",
        &join,
    ]);
    edit(&ctrl.disk.join("etc/labpool.toml"), |t| {
        for_tests(&t).replacen("[controller]\n", "[controller]\nlocal_node = false\n", 1)
    });
    let mut node = Machine::boot(&work.join("node"));
    let key = ctrl.disk.join("etc/cluster.key");
    node.ok(&[
        "init",
        "--join",
        &join,
        "--key",
        key.to_str().unwrap(),
        "--name",
        "n1",
        "--virtual-gpus",
        "1:t4",
        "--listen",
        "127.0.0.1:0",
    ]);
    edit(&node.disk.join("etc/labpool.toml"), |t| {
        for_tests(&t).replace("heartbeat = \"10s\"", "heartbeat = \"250ms\"")
    });
    ctrl.start_unit(Path::new(UNITS[0]));
    ctrl.wait_ok(&["queue"], Duration::from_secs(20));
    node.start_unit(Path::new(UNITS[1]));
    wait_until(
        Duration::from_secs(30),
        || ctrl.ok(&["nodes", "--json"]).contains("\"n1\""),
        || format!("n1 never joined\n{}", node.daemon_output()),
    );

    let output = work.join("job.out");
    let said = ctrl.ok(&[
        "submit",
        "--job-name",
        "packaged-job",
        "--gpus",
        "1",
        "-o",
        output.to_str().unwrap(),
        "--wrap",
        "echo ran on $(hostname -s) with GPU $CUDA_VISIBLE_DEVICES",
    ]);
    assert!(said.contains("Submitted"), "{said}");
    let history =
        || -> Vec<Value> { serde_json::from_str(&ctrl.ok(&["history", "--json"])).unwrap() };
    wait_until(
        Duration::from_secs(60),
        || history().iter().any(|j| j["name"] == "packaged-job"),
        || {
            format!(
                "the job never ended\n{}{}",
                ctrl.daemon_output(),
                node.daemon_output()
            )
        },
    );
    let job = history()
        .into_iter()
        .find(|j| j["name"] == "packaged-job")
        .unwrap();
    assert_eq!(job["state"], "COMPLETED", "{job}");
    assert_eq!(job["node"], "n1", "{job}");
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(text.contains("with GPU 0"), "{text}");

    // The state, off the box.
    let offbox = work.join("offbox");
    let said = ctrl.ok(&["state", "backup", "--to", offbox.to_str().unwrap()]);
    assert!(said.contains("backed up 1 jobs"), "{said}");

    // Everything goes: the daemons, the package, and both machines' disks.
    ctrl.shut_down();
    node.shut_down();
    let files = package_files();
    // What the admin wrote in the packaged paths on this host: the purge takes the config
    // and leaves the state.
    std::fs::write(Path::new(PACKAGED_DIRS[0]).join("cluster.key"), "kept?").unwrap();
    let kept = Path::new(PACKAGED_DIRS[1]).join("state/labpool.db");
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::write(&kept, "the admin's data").unwrap();
    dpkg(&["-r", "labpool"]);
    dpkg(&["--purge", "labpool"]);
    let left: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.symlink_metadata().is_ok())
        .collect();
    assert!(left.is_empty(), "the purge left {left:?}");
    for gone in [
        "/var/lib/dpkg/alternatives/sbatch",
        "/etc/systemd/system/labpool.service",
        "/etc/systemd/system/multi-user.target.wants/labpool.service",
    ] {
        assert!(!Path::new(gone).exists(), "the purge left {gone}");
    }
    assert_ne!(
        std::fs::canonicalize("/usr/bin/sbatch").ok().as_deref(),
        Some(Path::new("/usr/bin/labpool")),
        "the purge left labpool's sbatch"
    );
    assert!(
        !Path::new(PACKAGED_DIRS[0]).exists(),
        "the purge left /etc/labpool"
    );
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "the admin's data");
    std::fs::remove_dir_all(PACKAGED_DIRS[1]).unwrap();
    for disk in [&ctrl.disk, &node.disk] {
        std::fs::remove_dir_all(disk).unwrap();
    }

    // A new machine: the package, then the backup alone.
    dpkg(&["-i", &deb]);
    let mut new = Machine::boot(&work.join("new"));
    let said = new.ok(&["state", "restore", offbox.to_str().unwrap()]);
    for part in [
        "restored the config /etc/labpool/labpool.toml",
        "restored 1 jobs",
    ] {
        assert!(said.contains(part), "{part:?} not in {said}");
    }
    new.start_unit(Path::new(UNITS[0]));
    new.wait_ok(&["queue"], Duration::from_secs(20));
    let history: Vec<Value> = serde_json::from_str(&new.ok(&["history", "--json"])).unwrap();
    let job = history.iter().find(|j| j["name"] == "packaged-job");
    assert!(
        job.is_some_and(|j| j["state"] == "COMPLETED" && j["node"] == "n1"),
        "{history:?}"
    );
    new.shut_down();
}
