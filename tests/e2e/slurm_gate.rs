//! labpool over a real Slurm 22.05 (`[executor] kind = "slurm"`): the test cluster of
//! `scripts/slurm-cluster` with one labpool agent (cache only) per Slurm node gn1..gn3. Jobs
//! are submitted to labpool; Slurm runs them, on the node labpool chose, as their member, with
//! their datasets staged first.

use crate::pool::{ensure_user, read_output};
use crate::slurm_pool::{SlurmPool, dataset, wait};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A job that declares a dataset runs in Slurm on the node labpool chose, as its member, and
/// finds its data complete at its first line; the next job for the same data goes to the node
/// that holds it. A member's `scancel` in Slurm is recorded as CANCELLED; another member cannot
/// cancel the job through labpool; an exit code comes back as Slurm saw it.
#[test]
fn a_job_runs_in_slurm_where_labpool_placed_it_with_its_data_and_as_its_member() {
    // An A100 hour costs 2 credits: the ledger is checked against sacct's elapsed time.
    let Some(p) = SlurmPool::with_config("slurm_gate_placement", |t| {
        t.replace("# gpu_weights = {", "gpu_weights = {")
    }) else {
        return;
    };
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    dataset(&p, "ds", 40);
    let script = p.c.ctrl.script(
        "data.sh",
        "#!/bin/bash\n#LABPOOL --dataset ds\n#SBATCH --gres=gpu:1\n#SBATCH --output=data-%j.out\n\
         n=$(ls \"$LABPOOL_DATASET_DS\" | wc -l)\nsleep 2\n\
         echo \"files=$n node=$SLURMD_NODENAME uid=$(id -u) labpool=$LABPOOL_JOB_ID\"\n",
    );
    // The first job is sent to gn3, the last node by name, so that the second, which names
    // no node, goes there only for its data (ties go to the first node by name).
    let out = p.c.ctrl.cli_as(
        alice,
        alice_gid,
        &[
            "submit",
            "--parsable",
            "-w",
            "gn3",
            script.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let j = p.c.ctrl.wait_done(first, Duration::from_secs(60));
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", p.c.ctrl.serve_log());
    let node = j["node"].as_str().unwrap().to_string();
    assert_eq!(node, "gn3");
    let out = read_output(&p.c.ctrl.work.join(format!("data-{first}.out")));
    assert_eq!(
        out.trim(),
        format!("files=40 node={node} uid={alice} labpool={first}")
    );
    let sj = p.slurm_jobs_of(first);
    assert_eq!(sj.len(), 1, "one Slurm job per attempt: {sj:#?}");
    assert_eq!(sj[0]["job_state"], "COMPLETED");
    assert_eq!(sj[0]["user_id"], alice);
    assert_eq!(sj[0]["nodes"], node.as_str());

    let second = p.submit_as(alice, alice_gid, &script);
    let j2 = p.c.ctrl.wait_done(second, Duration::from_secs(60));
    assert_eq!(j2["state"], "COMPLETED", "{j2:#}");
    assert_eq!(
        j2["node"],
        node.as_str(),
        "the second job goes where the data is"
    );

    // An exit code travels through Slurm.
    let failing = p.c.ctrl.script(
        "fails.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --output=fails-%j.out\necho \"args=$1|$2\"\nexit $2\n",
    );
    let f = p.c.ctrl.cli_as(
        alice,
        alice_gid,
        &[
            "submit",
            "--parsable",
            failing.to_str().unwrap(),
            "it's",
            "3",
        ],
    );
    assert!(f.status.success(), "{}", String::from_utf8_lossy(&f.stderr));
    let f: u64 = String::from_utf8_lossy(&f.stdout).trim().parse().unwrap();
    let jf = p.c.ctrl.wait_done(f, Duration::from_secs(60));
    let out = read_output(&p.c.ctrl.work.join(format!("fails-{f}.out")));
    assert_eq!(out.trim(), "args=it's|3", "the script's arguments reach it");
    assert_eq!(
        (jf["state"].as_str(), jf["exit_code"].as_i64()),
        (Some("FAILED"), Some(3)),
        "{jf:#}"
    );

    // A long job: bob cannot cancel it through labpool; alice's scancel in Slurm ends it.
    let long = p.c.ctrl.script(
        "long.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --output=long-%j.out\nsleep 300\n",
    );
    let l = p.submit_as(alice, alice_gid, &long);
    let slurm_id = wait("the Slurm job to run", Duration::from_secs(30), || {
        p.slurm_jobs_of(l)
            .into_iter()
            .find(|j| j["job_state"] == "RUNNING")
            .map(|j| j["job_id"].as_u64().unwrap())
    });
    let out = p.c.ctrl.cli_as(bob, bob_gid, &["cancel", &l.to_string()]);
    assert!(!out.status.success(), "bob cancelled alice's job");
    assert_eq!(p.c.ctrl.job(l)["state"], "RUNNING");
    let out = Command::new("setpriv")
        .args([
            format!("--reuid={alice}"),
            format!("--regid={alice_gid}"),
            "--clear-groups".into(),
        ])
        .arg("scancel")
        .arg(slurm_id.to_string())
        .env("SLURM_CONF", &p.conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jl = p.c.ctrl.wait_done(l, Duration::from_secs(30));
    assert_eq!(jl["state"], "CANCELLED", "{jl:#}");

    // labpool's history and Slurm's accounting agree on every job's state, exit code and
    // elapsed time, and each charge is sacct's elapsed time × 1 GPU × the A100's weight (2).
    let credits: Value =
        serde_json::from_str(&p.c.ctrl.ok(&["credits", "--user", "lp-alice", "--json"])).unwrap();
    for id in [first, second, f, l] {
        let j = p.c.ctrl.job(id);
        let slurm_id = p.slurm_jobs_of(id).last().unwrap()["job_id"]
            .as_u64()
            .unwrap();
        let (state, exit, elapsed) = p.sacct(slurm_id);
        assert_eq!(j["state"].as_str(), Some(state.as_str()), "job {id}: {j:#}");
        if let Some(code) = j["exit_code"].as_i64() {
            assert_eq!(exit, format!("{code}:0"), "job {id}");
        }
        assert_eq!(j["elapsed_s"].as_u64(), Some(elapsed), "job {id}: {j:#}");
        let charged: f64 = credits["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["job"] == id && e["kind"] == "charge")
            .map(|e| e["amount"].as_f64().unwrap())
            .sum();
        let expected = elapsed as f64 / 3600.0 * 2.0;
        assert!(
            (charged - expected).abs() < 1e-9,
            "job {id}: charged {charged}, sacct says {expected}\n{}\n{}",
            p.c.ctrl.ok(&["show", &id.to_string()]),
            p.c.ctrl.serve_log()
        );
    }
}

/// Jobs Slurm runs for others take GPUs labpool never places over, and labpool's jobs still
/// start. Then the controller is killed with SIGKILL in the middle of a stream of 200 short
/// jobs that each check their dataset at their first line: none started without it, after the
/// restart every job ran exactly once, and labpool's states match Slurm's.
#[test]
fn foreign_load_is_respected_and_a_killed_controller_repeats_and_loses_nothing() {
    let Some(mut p) = SlurmPool::new("slurm_gate_crash") else {
        return;
    };
    // Foreign load: every GPU of gn1 and gn2.
    let foreign = [p.foreign_job("gn1", 120), p.foreign_job("gn2", 120)];
    wait("the foreign jobs to run", Duration::from_secs(20), || {
        let v: Value = serde_json::from_str(&p.slurm_ok("squeue", &["--json"])).unwrap();
        let running = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| foreign.contains(&j["job_id"].to_string()) && j["job_state"] == "RUNNING")
            .count();
        (running == 2).then_some(())
    });
    p.wait_taken(&["gn1", "gn2"]);
    // Every job reads its dataset at its first line: none may start without it complete.
    dataset(&p, "ds", 5);
    let runs = p.c.ctrl.work.join("runs.log");
    let short = p.c.ctrl.script(
        "short.sh",
        &format!(
            "#!/bin/bash\n#LABPOOL --dataset ds\n#SBATCH --gres=gpu:1\n#SBATCH --output=/dev/null\n\
             n=$(ls \"$LABPOOL_DATASET_DS\" | wc -l)\necho \"$LABPOOL_JOB_ID $SLURMD_NODENAME $n\" >> {}\nsleep 1\n",
            runs.display()
        ),
    );
    let first = p.c.ctrl.submit(&[short.to_str().unwrap()]);
    let j = p.c.ctrl.wait_done(first, Duration::from_secs(60));
    assert_eq!(
        (j["state"].as_str(), j["node"].as_str()),
        (Some("COMPLETED"), Some("gn3")),
        "{j:#}"
    );
    p.slurm_ok(
        "scancel",
        &foreign.iter().map(String::as_str).collect::<Vec<_>>(),
    );

    // A stream of jobs, and a SIGKILL in its middle: at the first moment, between two submits,
    // when some jobs have run and Slurm holds others of labpool's, queued or running. (Waiting
    // for the whole stream to be submitted first could find it all done on a loaded machine.)
    let mut ids = vec![first];
    let mut killed = false;
    for _ in 0..199 {
        ids.push(p.c.ctrl.submit(&[short.to_str().unwrap()]));
        let ran = std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count();
        if !killed
            && ran >= 8
            && p.ours()
                .iter()
                .any(|j| matches!(j["job_state"].as_str(), Some("RUNNING" | "PENDING")))
        {
            p.c.ctrl.kill9();
            std::thread::sleep(Duration::from_secs(2));
            p.c.ctrl.start();
            killed = true;
        }
    }
    assert!(
        killed,
        "the stream ended before labpool's jobs were in flight in Slurm"
    );
    for id in &ids {
        let j = p.c.ctrl.wait_done(*id, Duration::from_secs(120));
        assert_eq!(j["state"], "COMPLETED", "{j:#}");
    }
    assert!(
        p.c.ctrl.serve_log().contains("re-adopted from Slurm"),
        "the SIGKILL came while Slurm ran labpool's jobs, which the restarted controller adopts"
    );
    let text = std::fs::read_to_string(&runs).unwrap();
    for l in text.lines() {
        assert!(l.ends_with(" 5"), "a job started without its data: {l}");
    }
    for id in &ids {
        let n = text
            .lines()
            .filter(|l| l.split(' ').next() == Some(&id.to_string()))
            .count();
        assert_eq!(n, 1, "job {id} ran {n} times:\n{text}");
    }
    // By Slurm's accounting, each job ran exactly once (one record that started), and it
    // completed there as in labpool.
    let accounted = wait("sacct to record every job", Duration::from_secs(60), || {
        let runs = p.accounted_runs();
        ids.iter()
            .all(|id| {
                runs.get(id)
                    .is_some_and(|r| r.iter().all(|s| s != "RUNNING"))
            })
            .then_some(runs)
    });
    for id in &ids {
        assert_eq!(
            accounted[id],
            ["COMPLETED"],
            "job {id}: Slurm's records of its runs"
        );
    }
}

/// A node Slurm sets DOWN under a running labpool job: labpool requeues the job, which runs
/// again on another node; the node comes back when Slurm resumes it.
#[test]
fn a_node_down_in_slurm_requeues_the_job_elsewhere() {
    let Some(p) = SlurmPool::new("slurm_gate_node_down") else {
        return;
    };
    let script = p.c.ctrl.script(
        "long.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --output=/dev/null\nif [ \"$LABPOOL_ATTEMPT\" = 1 ]; then sleep 300; else sleep 1; fi\n",
    );
    let id = p.c.ctrl.submit(&[script.to_str().unwrap()]);
    let node = p.running_in_slurm(id);
    // The node fails as a real one does: its slurmd stops answering (SIGSTOP), and the admin
    // (or slurmctld, after SlurmdTimeout) sets it DOWN. A live slurmd would bring it back at once
    // under the test cluster's ReturnToService=2.
    let run_dir = p.conf.parent().unwrap().parent().unwrap();
    let pid = std::fs::read_to_string(run_dir.join(format!("slurmd-{node}.pid"))).unwrap();
    let slurmd = nix::unistd::Pid::from_raw(pid.trim().parse().unwrap());
    nix::sys::signal::kill(slurmd, nix::sys::signal::Signal::SIGSTOP).unwrap();
    p.slurm_ok(
        "scontrol",
        &[
            "update",
            &format!("nodename={node}"),
            "state=down",
            "reason=labpool-test",
        ],
    );
    let resume = Resume {
        slurmd,
        node: node.clone(),
        conf: p.conf.clone(),
    };
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(60));
    drop(resume);
    assert_eq!(j["state"], "COMPLETED", "{j:#}");
    assert_eq!(j["attempt"], 2, "{j:#}");
    assert_ne!(
        j["node"].as_str(),
        Some(node.as_str()),
        "{j:#}\n{:#?}\n{}",
        p.slurm_jobs_of(id),
        p.c.ctrl.serve_log()
    );
    let events = p.c.ctrl.ok(&["show", &id.to_string()]);
    assert!(
        events.contains(&format!("node {node} went DOWN")),
        "{events}"
    );
    wait("the node to come back", Duration::from_secs(30), || {
        p.c.nodes()
            .iter()
            .find(|n| n["name"] == node.as_str())
            .is_some_and(|n| n["state"] != "DOWN")
            .then_some(())
    });
}

/// Wakes a stopped slurmd and resumes its node, however the test ends: the cluster is shared.
struct Resume {
    slurmd: nix::unistd::Pid,
    node: String,
    conf: PathBuf,
}

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.slurmd, nix::sys::signal::Signal::SIGCONT);
        let _ = Command::new("scontrol")
            .args(["update", &format!("nodename={}", self.node), "state=resume"])
            .env("SLURM_CONF", &self.conf)
            .output();
    }
}
