//! Over a real Slurm, agents are optional: labpool schedules Slurm's nodes from what Slurm says
//! they have (`Gres=`), and an agent that joins a node takes it over.

use crate::slurm_pool::{SlurmPool, dataset, wait};
use std::time::Duration;

/// With no agent running, the four nodes of the test Slurm are in the pool with their eight
/// a100 each (from `Gres=gpu:a100:8`); a job that declares a dataset runs in Slurm reading it
/// from the shared storage, and survives a SIGKILL of the controller (one Slurm job, one
/// attempt). An agent that then joins gn1 with four GPUs takes the node over, and the doctor
/// says that it and Slurm disagree.
#[test]
fn over_slurm_nodes_need_no_agent_and_the_doctor_flags_an_agent_that_disagrees() {
    let Some(mut p) = SlurmPool::without_agents("slurm_gate_agentless") else {
        return;
    };
    let nodes = wait(
        "Slurm's four nodes in the pool",
        Duration::from_secs(30),
        || {
            let n = p.c.nodes();
            (n.len() == 4 && n.iter().all(|n| n["state"] == "IDLE")).then_some(n)
        },
    );
    for n in &nodes {
        assert_eq!(n["gpu_source"], "slurm", "{n:#}");
        assert!(n["agent"].is_null(), "{n:#}");
        let gpus = n["gpus"].as_array().unwrap();
        assert_eq!(gpus.len(), 8, "{n:#}");
        assert!(gpus.iter().all(|g| g["gpu_type"] == "a100"), "{n:#}");
        assert_eq!(n["cpus"], 64, "{n:#}");
        assert_eq!(n["mem_mib"], 491520, "{n:#}");
    }

    dataset(&p, "imgs", 5);
    let source = p.c.ctrl.dir.join("shared/datasets/imgs");
    let out = p.c.ctrl.work.join("agentless.out");
    let script = p.c.ctrl.script(
        "agentless.sh",
        &format!(
            "#!/bin/bash\n#LABPOOL --dataset imgs\n#SBATCH --gres=gpu:a100:2\n#SBATCH --output={}\n\
             echo \"data $LABPOOL_DATASET_IMGS $(ls \"$LABPOOL_DATASET_IMGS\" | wc -l)\"\nsleep 6\necho done\n",
            out.display()
        ),
    );
    let id = p.c.ctrl.submit(&[script.to_str().unwrap()]);
    let node = p.running_in_slurm(id);
    p.c.ctrl.kill9();
    std::thread::sleep(Duration::from_secs(1));
    p.c.ctrl.start();
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(60));
    assert_eq!(
        (
            j["state"].as_str(),
            j["attempt"].as_u64(),
            j["node"].as_str()
        ),
        (Some("COMPLETED"), Some(1), Some(node.as_str())),
        "{j:#}\n{}",
        p.c.ctrl.serve_log()
    );
    assert!(
        p.c.ctrl.serve_log().contains("re-adopted from Slurm"),
        "the restarted controller found the job in Slurm"
    );
    assert_eq!(p.slurm_jobs_of(id).len(), 1, "one Slurm job ran it");
    let text = std::fs::read_to_string(&out).unwrap();
    let canonical = std::fs::canonicalize(&source).unwrap();
    assert!(
        text.contains(&format!("data {} 5\n", source.display()))
            || text.contains(&format!("data {} 5\n", canonical.display())),
        "the job read the shared copy, whole: {text}"
    );
    assert!(text.ends_with("done\n"), "{text}");

    // An agent joins gn1, with four GPUs where Slurm counts eight.
    let i = p.c.add_agent("gn1", "4:a100", "127.0.0.1");
    p.c.start_agent(i);
    let gn1 = p.c.wait_node("gn1", Duration::from_secs(20), |n| {
        n["gpus"].as_array().is_some_and(|g| g.len() == 4)
    });
    assert_eq!(gn1["gpu_source"], "virtual", "the agent's GPUs: {gn1:#}");
    // It stays the agent's through later reads of Slurm.
    std::thread::sleep(Duration::from_secs(1));
    let gn1 =
        p.c.nodes()
            .into_iter()
            .find(|n| n["name"] == "gn1")
            .unwrap();
    assert_eq!(gn1["gpus"].as_array().unwrap().len(), 4, "{gn1:#}");

    let report: serde_json::Value =
        serde_json::from_slice(&p.c.ctrl.cli(&["doctor", "--json"]).stdout).unwrap();
    let slurm: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "slurm" && f["subject"] != "Prolog")
        .collect();
    assert_eq!(slurm.len(), 1, "{slurm:#?}");
    assert_eq!(slurm[0]["subject"], "gn1", "{slurm:#?}");
    assert_eq!(slurm[0]["status"], "fail", "{slurm:#?}");
    let what = slurm[0]["what"].as_str().unwrap();
    assert!(
        what.contains("reports 4 GPUs (a100: 4)") && what.contains("says 8 (a100: 8)"),
        "{what}"
    );
}
