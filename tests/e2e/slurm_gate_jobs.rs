//! labpool over a real Slurm, continued: a multi-node job is one Slurm job on the nodes
//! labpool chose, started by Slurm's own `srun`; Slurm enforces the time limit and sends the
//! `--signal` warning; one member cannot release another's held job; an interactive session
//! runs as a Slurm job.

use crate::interactive::Terminal;
use crate::pool::{ensure_user, read_output};
use crate::slurm_pool::{SlurmPool, dataset, wait};
use std::time::Duration;

/// A 2-node job held at submit: bob cannot release it, alice can; it then runs as one Slurm job
/// pinned to labpool's two nodes, and Slurm's `srun` starts a task on each.
#[test]
fn a_multi_node_job_is_one_slurm_job_on_labpools_nodes_and_only_its_owner_releases_it() {
    let Some(p) = SlurmPool::new("slurm_gate_gang") else {
        return;
    };
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let script = p.c.ctrl.script(
        "gang.sh",
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:2\n\
         #SBATCH --output=gang-%j.out\n#SBATCH --hold\n\
         echo \"batch=$SLURMD_NODENAME nodes=$SLURM_JOB_NODELIST master=$MASTER_ADDR\"\n\
         srun bash -c 'echo \"rank=$SLURM_PROCID node=$SLURMD_NODENAME uid=$(id -u)\"' | sort\n",
    );
    let id = p.submit_as(alice, alice_gid, &script);
    assert_eq!(p.c.ctrl.job(id)["state"], "PENDING");
    let refused = p.c.ctrl.cli_as(bob, bob_gid, &["release", &id.to_string()]);
    assert!(!refused.status.success(), "bob released alice's job");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("your own"), "{said}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(p.slurm_jobs_of(id).is_empty(), "a held job is not in Slurm");
    let ok =
        p.c.ctrl
            .cli_as(alice, alice_gid, &["release", &id.to_string()]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let j = p.c.ctrl.wait_done(id, Duration::from_secs(90));
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", p.c.ctrl.serve_log());
    let first = j["node"].as_str().unwrap().to_string();
    let second = j["others"][0]["node"].as_str().unwrap().to_string();
    assert_ne!(first, second);
    let sj = p.slurm_jobs_of(id);
    assert_eq!(sj.len(), 1, "one Slurm job for the whole gang: {sj:#?}");
    let mut names = [first.clone(), second.clone()];
    names.sort();
    let out = read_output(&p.c.ctrl.work.join(format!("gang-{id}.out")));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "batch={first} nodes={} master=127.0.0.1",
                sj[0]["nodes"].as_str().unwrap()
            ),
            format!("rank=0 node={} uid={alice}", names[0]),
            format!("rank=1 node={} uid={alice}", names[1]),
        ],
        "{out}"
    );
    let nodes = labpool_scheduler::hostlist::expand(sj[0]["nodes"].as_str().unwrap()).unwrap();
    assert_eq!(nodes, names, "Slurm ran it on labpool's nodes");
}

/// `--time` and `--signal=B:USR1@50` reach Slurm, which enforces them: the script gets USR1
/// before the limit, then TERM at it, and labpool records TIMEOUT as sacct does.
#[test]
fn slurm_enforces_the_time_limit_and_sends_the_warning_signal() {
    let Some(p) = SlurmPool::new("slurm_gate_limit") else {
        return;
    };
    let script = p.c.ctrl.script(
        "limit.sh",
        "#!/bin/bash\n#SBATCH --time=1\n#SBATCH --signal=B:USR1@50\n#SBATCH --gres=gpu:1\n\
         #SBATCH --output=limit-%j.out\n\
         trap 'echo usr1' USR1\ntrap 'echo term; exit 0' TERM\n\
         echo started\nwhile true; do sleep 1; done\n",
    );
    let id = p.c.ctrl.submit(&[script.to_str().unwrap()]);
    // Slurm counts limits in minutes and checks them every 30 s; KillWait is 30 s.
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(180));
    assert_eq!(j["state"], "TIMEOUT", "{j:#}\n{}", p.c.ctrl.serve_log());
    let out = read_output(&p.c.ctrl.work.join(format!("limit-{id}.out")));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"started"), "{out}");
    let usr1 = lines.iter().position(|l| *l == "usr1");
    let term = lines.iter().position(|l| *l == "term");
    assert!(
        usr1.is_some() && term.is_some() && usr1 < term,
        "USR1 first, then TERM: {out}"
    );
    let slurm_id = p.slurm_jobs_of(id).last().unwrap()["job_id"]
        .as_u64()
        .unwrap();
    let (state, _, elapsed) = p.sacct(slurm_id);
    assert_eq!(state, "TIMEOUT");
    assert!(elapsed >= 60, "ran {elapsed}s of a 1-minute limit");
    assert_eq!(j["elapsed_s"].as_u64(), Some(elapsed), "{j:#}");
}

/// `labpool run --pty bash` over Slurm: the session's host runs as a Slurm job on the node
/// labpool chose, and the member's terminal is joined to its shell.
#[test]
fn an_interactive_session_runs_as_a_slurm_job() {
    let Some(p) = SlurmPool::new("slurm_gate_session") else {
        return;
    };
    let mut term = Terminal::open_with(
        &p.c.ctrl,
        &p.c.ctrl.bin,
        &["run", "--pty", "-G", "1", "bash"],
    );
    term.expect("labpool: job ");
    term.type_line("echo \"on=$SLURMD_NODENAME job=$LABPOOL_JOB_ID gpus=$SLURM_GPUS_ON_NODE\"");
    term.expect("on=gn");
    let jobs: Vec<serde_json::Value> =
        serde_json::from_str(&p.c.ctrl.ok(&["queue", "--json"])).unwrap();
    let id = jobs[0]["id"].as_u64().unwrap();
    let node = jobs[0]["node"].as_str().unwrap().to_string();
    term.expect(&format!("on={node} job={id} gpus=1"));
    let sj = p.slurm_jobs_of(id);
    assert_eq!(sj.len(), 1, "{sj:#?}");
    assert_eq!(sj[0]["job_state"], "RUNNING");
    assert_eq!(sj[0]["nodes"], node.as_str());
    term.type_line("exit 3");
    assert_eq!(term.exit_code(), Some(3), "{}", p.c.ctrl.serve_log());
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(30));
    assert_eq!(
        (j["state"].as_str(), j["exit_code"].as_i64()),
        (Some("FAILED"), Some(3)),
        "{j:#}"
    );
}

/// A foreign job takes a node's GPUs after labpool placed a job there and before Slurm started
/// it: Slurm cannot start labpool's job, which is cancelled in Slurm within the start timeout
/// and placed again, and runs once a node is free. No GPU is booked twice.
#[test]
fn a_job_whose_gpus_a_foreign_job_took_is_placed_again() {
    // The job takes its GPUs at once (no stage-in), so that it is placed while its data waits.
    let Some(p) = SlurmPool::with_config("slurm_gate_race", |t| {
        t.replace(
            crate::datasets::STAGE_IN_DEFAULT,
            crate::datasets::STAGE_IN_OFF,
        )
    }) else {
        return;
    };
    let f2 = p.foreign_job("gn2", 300);
    let f3 = p.foreign_job("gn3", 300);
    let mut left = Scancel(p.conf.clone(), vec![f2.clone(), f3.clone()]);
    p.wait_taken(&["gn2", "gn3"]);
    // gn1's agent is paused, so the job's data waits there while the foreign job arrives.
    dataset(&p, "ds", 5);
    let agent = nix::unistd::Pid::from_raw(p.c.agents[0].pid().unwrap() as i32);
    assert_eq!(p.c.agents[0].name, "gn1");
    nix::sys::signal::kill(agent, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let cont = Cont(agent);
    let script = p.c.ctrl.script(
        "job.sh",
        "#!/bin/bash\n#LABPOOL --dataset ds\n#SBATCH --gres=gpu:8\n#SBATCH --output=/dev/null\nsleep 1\n",
    );
    let id = p.c.ctrl.submit(&[script.to_str().unwrap()]);
    let j =
        p.c.ctrl
            .wait_for(id, Duration::from_secs(20), |j| j["node"] == "gn1");
    assert_ne!(j["state"], "RUNNING", "{j:#}");
    let f1 = p.foreign_job("gn1", 300);
    left.1.push(f1.clone());
    wait(
        "the foreign job to run on gn1",
        Duration::from_secs(20),
        || {
            let v: serde_json::Value =
                serde_json::from_str(&p.slurm_ok("squeue", &["--json", "--all"])).unwrap();
            v["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j["job_id"].as_u64() == f1.parse().ok() && j["job_state"] == "RUNNING")
                .then_some(())
        },
    );
    drop(cont);
    // Submitted and released once its data is there, it pends behind the foreign job; after
    // the start timeout (10 s here) it is cancelled in Slurm and placed again.
    let j = p.c.ctrl.wait_for(id, Duration::from_secs(60), |j| {
        j["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "requeue")
    });
    let why = j["events"].as_array().unwrap().last().unwrap()["detail"].to_string();
    assert!(why.contains("Slurm did not start its job"), "{why}");
    // gn1 counts as taken now, though Slurm's view did not change: it waits for a free node.
    std::thread::sleep(Duration::from_secs(2));
    let j = p.c.ctrl.job(id);
    assert_eq!(
        (j["state"].as_str(), j["reason"].as_str()),
        (Some("PENDING"), Some("Resources")),
        "{j:#}"
    );
    let first = p.slurm_jobs_of(id);
    assert!(
        first
            .iter()
            .all(|j| j["job_state"] != "RUNNING" && j["job_state"] != "COMPLETED"),
        "{first:#?}"
    );
    p.slurm_ok("scancel", &[&f2]);
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(90));
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", p.c.ctrl.serve_log());
    assert_eq!(j["node"], "gn2", "{j:#}");
    drop(left);
}

/// Cancels the test's own Slurm jobs however it ends: the cluster is shared.
struct Scancel(std::path::PathBuf, Vec<String>);

impl Drop for Scancel {
    fn drop(&mut self) {
        let _ = std::process::Command::new("scancel")
            .args(&self.1)
            .env("SLURM_CONF", &self.0)
            .output();
    }
}

/// Wakes a paused agent however the test ends.
struct Cont(nix::unistd::Pid);

impl Drop for Cont {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

/// `labpool requeue` and `labpool cancel` of a job running in Slurm: the Slurm job is
/// cancelled, and its end is recorded, so the requeued job runs again and the cancelled one
/// ends CANCELLED with its GPUs free.
#[test]
fn labpool_requeue_and_cancel_stop_the_slurm_job_and_are_recorded() {
    let Some(p) = SlurmPool::new("slurm_gate_cancel") else {
        return;
    };
    let script = p.c.ctrl.script(
        "long.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --output=/dev/null\nsleep 300\n",
    );
    let id = p.c.ctrl.submit(&[script.to_str().unwrap()]);
    p.running_in_slurm(id);
    p.c.ctrl.ok(&["requeue", &id.to_string()]);
    p.c.ctrl.wait_for(id, Duration::from_secs(60), |j| {
        j["state"] == "RUNNING" && j["attempt"] == 2
    });
    p.c.ctrl.ok(&["cancel", &id.to_string()]);
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(30));
    assert_eq!(j["state"], "CANCELLED", "{j:#}");
    let jobs = p.slurm_jobs_of(id);
    assert_eq!(jobs.len(), 2, "one Slurm job per attempt: {jobs:#?}");
    for sj in &jobs {
        assert_eq!(sj["job_state"], "CANCELLED", "{sj:#}");
    }
    let nodes = p.c.nodes();
    assert!(
        nodes.iter().all(|n| n["state"] == "IDLE"),
        "the GPUs are free again: {nodes:#?}"
    );
}
