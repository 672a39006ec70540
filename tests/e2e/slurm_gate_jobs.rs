//! labpool over a real Slurm, continued: a multi-node job is one Slurm job on the nodes
//! labpool chose, started by Slurm's own `srun`; Slurm enforces the time limit and sends the
//! `--signal` warning; one member cannot release another's held job.

use crate::pool::{ensure_user, read_output};
use crate::slurm_gate::SlurmPool;
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
