//! labpool over a real Slurm, continued: dataset features on Slurm's nodes through a slurmctld
//! restart and a reconfigure; `labpool init --executor slurm`; the Prolog; the doctor.

use crate::slurm_pool::{SlurmPool, dataset, wait};
use std::time::Duration;

impl SlurmPool {
    /// A node's available features in Slurm.
    fn features(&self, node: &str) -> Vec<String> {
        let out = self.slurm_ok("scontrol", &["show", "node", node, "-o"]);
        out.split(' ')
            .find_map(|f| f.strip_prefix("AvailableFeatures="))
            .unwrap_or_default()
            .split(',')
            .map(str::to_string)
            .collect()
    }

    /// Waits until `node` carries the feature `f` in Slurm.
    fn wait_feature(&self, node: &str, f: &str) {
        wait(
            &format!("feature {f} on {node}"),
            Duration::from_secs(30),
            || self.features(node).iter().any(|x| x == f).then_some(()),
        );
    }
}

/// Nodes carry a `ds_<name>` feature for each dataset they hold, so plain `sbatch
/// --prefer=ds_<name>` users benefit too. slurmctld restarted in the middle of a job, and then
/// `scontrol reconfigure`: the job finishes, and the features come back.
#[test]
fn dataset_features_and_jobs_survive_a_slurmctld_restart_and_a_reconfigure() {
    let Some(p) = SlurmPool::new("slurm_gate_slurmctld") else {
        return;
    };
    dataset(&p, "imgs", 5);
    let script = p.c.ctrl.script(
        "data.sh",
        "#!/bin/bash\n#LABPOOL --dataset imgs\n#SBATCH --gres=gpu:1\n#SBATCH --output=/dev/null\nsleep 6\n",
    );
    let id = p.c.ctrl.submit(&[script.to_str().unwrap()]);
    let node = p.running_in_slurm(id);
    p.wait_feature(&node, "ds_imgs");
    assert!(
        p.features(&node).iter().any(|f| f == "a100"),
        "the features slurm.conf gives are kept: {:?}",
        p.features(&node)
    );

    // slurmctld stops and starts again (from its saved state, as a service restart does).
    let run_dir = p.conf.parent().unwrap().parent().unwrap().to_path_buf();
    let pid: i32 = std::fs::read_to_string(run_dir.join("slurmctld.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait("slurmctld to stop", Duration::from_secs(30), || {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            .is_err()
            .then_some(())
    });
    let started = p.slurm_cmd("slurmctld").status().unwrap();
    assert!(started.success());
    wait("slurmctld to answer", Duration::from_secs(30), || {
        p.slurm_cmd("scontrol")
            .arg("ping")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(drop)
    });
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(60));
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", p.c.ctrl.serve_log());
    assert_eq!(
        j["attempt"], 1,
        "the job ran once, through the restart: {j:#}"
    );
    p.wait_feature(&node, "ds_imgs");

    p.slurm_ok("scontrol", &["reconfigure"]);
    p.wait_feature(&node, "ds_imgs");
    // A plain Slurm job that asks for the data goes to its node.
    let out = p
        .slurm_cmd("sbatch")
        .args(["--constraint=ds_imgs", "--test-only", "--wrap", "true"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("on nodes {node} ")), "{said}");
}

/// `labpool init --executor slurm` reads the Slurm it is pointed at: Slurm's partitions with
/// their limits and nodes, no jobs on the controller's own machine, and the executor section.
/// The doctor then checks that Slurm answers, that accounting keeps comments, and that every
/// Slurm node has an agent.
#[test]
fn init_reads_slurms_partitions_and_the_doctor_checks_the_gate() {
    let Some(conf) = crate::slurm_peer::slurm("slurm_gate_init") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::pool::bin())
        .args(["init", "--dir"])
        .arg(dir.path())
        .args(["--executor", "slurm", "--slurm-conf"])
        .arg(&conf)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("Slurm: 4 nodes, 6 partitions"), "{said}");
    let config = labpool::settings::Config::load(&dir.path().join("labpool.toml")).unwrap();
    assert_eq!(config.executor.kind, labpool::settings::ExecutorKind::Slurm);
    assert_eq!(config.executor.slurm_conf.as_deref(), Some(conf.as_path()));
    assert!(!config.controller.local_node);
    let names: Vec<&str> = config.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["normal", "debug", "interactive", "high", "lend", "reclaim"]
    );
    let lend = &config.partitions[4];
    assert_eq!(lend.nodes.as_deref(), Some(&["gn4".to_string()][..]));
    assert!(config.partitions[0].default);

    // The doctor of a gate on a Slurm without the Prolog: gn4, which has no agent, is no fault.
    let Some(p) = SlurmPool::new("slurm_gate_doctor") else {
        return;
    };
    let out = p.c.ctrl.cli(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let slurm: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "slurm")
        .collect();
    let subjects: Vec<&str> = slurm
        .iter()
        .map(|f| f["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, ["Prolog"], "{slurm:#?}");
}

/// The Prolog shipped in `deploy/slurm/` passes a job that is not labpool's, passes a labpool
/// job whose data is complete on the node, and refuses one whose data is not.
#[test]
fn the_prolog_refuses_a_labpool_job_whose_data_is_not_complete() {
    let Some(conf) = crate::slurm_peer::slurm("slurm_gate_prolog") else {
        return;
    };
    let prolog =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/slurm/labpool-prolog.sh");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("imgs/v1");
    std::fs::create_dir_all(&data).unwrap();
    let held = |comment: &str| -> String {
        let out = std::process::Command::new("sbatch")
            .env("SLURM_CONF", &conf)
            .args(["--parsable", "--hold", "--output=/dev/null"])
            .arg(format!("--comment={comment}"))
            .args(["--wrap", "true"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let run = |id: &str| {
        std::process::Command::new(&prolog)
            .env("SLURM_CONF", &conf)
            .env("SLURM_JOB_ID", id)
            .output()
            .unwrap()
    };
    let foreign = held("my own notes");
    let ours = held(&format!("labpool:7:1;pool=abc;data={}", data.display()));
    let cancel = || {
        let _ = std::process::Command::new("scancel")
            .env("SLURM_CONF", &conf)
            .args([&foreign, &ours])
            .output();
    };
    assert!(run(&foreign).status.success());
    let refused = run(&ours);
    if refused.status.code() != Some(1) {
        cancel();
    }
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not complete"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    std::fs::write(dir.path().join("imgs/v1.complete"), "").unwrap();
    let passed = run(&ours);
    cancel();
    assert!(
        passed.status.success(),
        "{}",
        String::from_utf8_lossy(&passed.stderr)
    );
}
