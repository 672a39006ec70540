//! Multi-node jobs on two real agents, one of them in a network namespace: the gang starts on
//! both nodes or on neither, its ranks find each other over TCP with only `MASTER_ADDR`,
//! `MASTER_PORT`, `RANK` and `WORLD_SIZE` (and, separately, `TF_CONFIG`), `srun` runs its
//! tasks on both nodes, its environment is put on both nodes and its tasks run inside it, and
//! cutting one node's link requeues the whole job.

use crate::envs::{have_path, modules_env};
use crate::netns::{Netns, cluster_with_agent_inside};
use crate::nodes::Cluster;
use crate::pool::{has, have_root, have_tool, read_output, s};
use serde_json::Value;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// Rank 0 listens on MASTER_ADDR:MASTER_PORT and sums the ranks every other rank sends it.
const RANKS_PY: &str = r#"
import os, socket, time
rank = int(os.environ["RANK"]); world = int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
node = os.environ["SLURMD_NODENAME"]
data = os.environ["LABPOOL_DATASET_TOY"]
# One write per line (newline included): unbuffered Python (PYTHONUNBUFFERED) writes the text
# and the newline apart, and the ranks share one output file.
print(f"rank={rank} local={os.environ['LOCAL_RANK']} node={node} nodeid={os.environ['SLURM_NODEID']} gpus={os.environ['CUDA_VISIBLE_DEVICES']}\n", end="", flush=True)
print(f"data rank={rank} {open(data + '/hello.txt').read().strip()} at {data}\n", end="", flush=True)
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(world)
    total = 0
    for _ in range(world - 1):
        c, _ = s.accept(); total += int(c.recv(64).decode()); c.close()
    print(f"sum={total} world={world}", flush=True)
else:
    for _ in range(200):
        try:
            c = socket.create_connection((addr, port), timeout=2); break
        except OSError:
            time.sleep(0.05)
    c.sendall(str(rank).encode()); c.close()
"#;

/// Each task binds its own worker address from TF_CONFIG, on its own node.
const TF_PY: &str = r#"
import json, os, socket
tf = json.loads(os.environ["TF_CONFIG"])
me = tf["task"]["index"]
host, port = tf["cluster"]["worker"][me].rsplit(":", 1)
s = socket.socket(); s.bind((host, int(port)))
print(f"tf worker {me} of {len(tf['cluster']['worker'])} bound {host}:{port}", flush=True)
"#;

/// A controller on the host, `hostnode` on the host side of a veth pair and `nsnode` in the
/// namespace, 4 GPUs each.
pub fn two_nodes(test: &str) -> Option<(Netns, Cluster)> {
    if !have_root(test) || !have_tool(test, "ip") || !have_tool(test, "python3") {
        return None;
    }
    let (ns, mut c, a) = cluster_with_agent_inside("2s", "nsnode", "4:t4");
    c.start_agent(a);
    let h = c.add_agent("hostnode", "4:t4", &ns.host_ip);
    c.start_agent(h);
    Some((ns, c))
}

#[test]
fn a_two_node_job_runs_its_ranks_on_both_nodes_and_they_meet_over_tcp() {
    let Some((ns, c)) = two_nodes("a_two_node_job_runs_its_ranks") else {
        return;
    };
    std::fs::write(c.ctrl.work.join("ranks.py"), RANKS_PY).unwrap();
    // A dataset the job declares: staged on both of its nodes before it starts.
    let toy = c.ctrl.dir.join("shared/datasets/toy");
    std::fs::create_dir_all(&toy).unwrap();
    std::fs::write(toy.join("hello.txt"), "toy-data\n").unwrap();
    c.ctrl.ok(&["dataset", "add", "toy", toy.to_str().unwrap()]);
    std::fs::write(c.ctrl.work.join("tf.py"), TF_PY).unwrap();
    let script = c.ctrl.script(
        "gang.sh",
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n\
         #SBATCH --gpus-per-task=1\n#SBATCH -o gang.out\n#LABPOOL --dataset toy\n\
         echo \"nodelist=$SLURM_JOB_NODELIST nnodes=$SLURM_NNODES nodeid=$SLURM_NODEID tasks=$SLURM_TASKS_PER_NODE master=$MASTER_ADDR\"\n\
         cat \"$LABPOOL_HOSTFILE\"\n\
         srun python3 ranks.py\n\
         srun -l python3 tf.py\n",
    );
    let id = c.ctrl.submit(&[script.to_str().unwrap()]);
    let job = c.ctrl.wait_done(id, T);
    let out = read_output(&c.ctrl.work.join("gang.out"));
    assert_eq!(
        s(&job, "state"),
        "COMPLETED",
        "{job:#}\n{out}\n{}",
        c.logs()
    );
    // The batch script runs on the first node (in name order), and sees the whole gang.
    assert_eq!(s(&job, "node"), "hostnode", "{job:#}");
    has(
        &out,
        &[
            "nodelist=hostnode,nsnode nnodes=2 nodeid=0 tasks=2(x2)",
            &format!("master={}", ns.host_ip),
            &format!("{} slots=2\n{} slots=2", ns.host_ip, ns.ns_ip),
        ],
    );
    // Four ranks, two per node, each with a GPU of its own; rank 0 got every other rank.
    has(&out, &["sum=6 world=4"]);
    for (rank, node, nodeid) in [
        (0, "hostnode", 0),
        (1, "hostnode", 0),
        (2, "nsnode", 1),
        (3, "nsnode", 1),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("rank={rank} ")))
            .unwrap_or_else(|| panic!("no line of rank {rank}:\n{out}"));
        has(
            line,
            &[&format!(
                "local={} node={node} nodeid={nodeid} gpus=",
                rank % 2
            )],
        );
        assert!(!line.ends_with("gpus=") && !line.contains(','), "{line}");
    }
    // Each rank reads the dataset from its own node's cache.
    for (rank, node) in [(0, "hostnode"), (2, "nsnode")] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("data rank={rank} ")))
            .unwrap_or_else(|| panic!("no data line of rank {rank}:\n{out}"));
        has(line, &["toy-data at "]);
        assert!(line.contains(&format!("/{node}/")), "{line}");
    }
    // TF_CONFIG: every worker binds its own address, on its own node.
    for w in 0..4 {
        let host = if w < 2 { &ns.host_ip } else { &ns.ns_ip };
        has(&out, &[&format!("{w}: tf worker {w} of 4 bound {host}:")]);
    }
    // Both steps ran on both nodes, and show lists them.
    let steps: Vec<(u64, u64, Vec<Value>)> = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            (
                st["step"].as_u64().unwrap(),
                st["tasks"].as_u64().unwrap(),
                st["nodes"].as_array().unwrap().clone(),
            )
        })
        .collect();
    assert_eq!(steps.len(), 2, "{job:#}");
    for (_, tasks, nodes) in &steps {
        assert_eq!(*tasks, 4);
        assert_eq!(nodes, &[Value::from("hostnode"), Value::from("nsnode")]);
    }
    let show = c.ctrl.ok(&["show", &id.to_string()]);
    has(
        &show,
        &["hostnode,nsnode", "GPU 0,1 on hostnode, GPU 0,1 on nsnode"],
    );
    assert_eq!(
        (&job["node_count"], &job["ntasks"]),
        (&Value::from(2), &Value::from(4))
    );
    // What Slurm's commands say of it.
    let bin = c.ctrl.dir.join("slurm-bin");
    c.ctrl
        .ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let slurm = |name: &str, args: &[&str]| -> String {
        let o = std::process::Command::new(bin.join(name))
            .args(args)
            .env("LABPOOL_CONFIG", &c.ctrl.config)
            .output()
            .unwrap();
        assert!(o.status.success(), "{name} {args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let id_s = id.to_string();
    let sacct = slurm(
        "sacct",
        &[
            "-j",
            &id_s,
            "-X",
            "-P",
            "-n",
            "--format=NNodes,AllocCPUS,AllocTRES,NodeList",
        ],
    );
    // Two tasks a node, one core each: 4 cores; one GPU a task: 4 GPUs.
    has(
        &sacct,
        &["2|4|cpu=4,gres/gpu=4,", ",node=2|hostnode,nsnode"],
    );
    let sc = slurm("scontrol", &["show", "job", &id_s]);
    has(
        &sc,
        &["NumNodes=2", "NumTasks=4", "NodeList=hostnode,nsnode"],
    );
}

#[test]
fn a_gang_waits_whole_and_losing_one_node_requeues_all_of_it() {
    let Some((ns, c)) = two_nodes("a_gang_waits_whole") else {
        return;
    };
    let ledger = c.ctrl.work.join("ledger");
    // nsnode is busy: 3 of its 4 GPUs are held.
    let blocker = c
        .ctrl
        .submit(&["--nodelist", "nsnode", "--gpus", "3", "--wrap", "sleep 300"]);
    c.ctrl.wait_for(blocker, T, |j| j["state"] == "RUNNING");
    let script = c.ctrl.script(
        "gang.sh",
        &format!(
            "#!/bin/bash\n#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=2 -o gang2.out\n\
             srun bash -c 'echo start $SLURM_RESTART_COUNT $SLURMD_NODENAME >> {l}; sleep 8; echo end $SLURM_RESTART_COUNT $SLURMD_NODENAME >> {l}'\n",
            l = ledger.display()
        ),
    );
    let id = c.ctrl.submit(&[script.to_str().unwrap()]);
    // hostnode alone could take half of it; the gang starts nowhere.
    std::thread::sleep(Duration::from_secs(3));
    let j = c.ctrl.job(id);
    assert_eq!(s(&j, "state"), "PENDING", "{j:#}");
    has(
        s(&j, "reason_detail"),
        &[
            "1/2 nodes fit (the job needs 2 at once)",
            "reserved on hostnode,nsnode",
        ],
    );
    assert!(!ledger.exists(), "a part of the gang ran");
    c.ctrl.ok(&["cancel", &blocker.to_string()]);
    c.ctrl.wait_for(id, T, |j| j["state"] == "RUNNING");
    let t0 = Instant::now();
    while std::fs::read_to_string(&ledger)
        .unwrap_or_default()
        .lines()
        .count()
        < 2
    {
        assert!(
            t0.elapsed() < T,
            "the gang's tasks never started\n{}",
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // nsnode's link goes: the whole gang waits again, and its part on hostnode is stopped.
    ns.cut();
    let j = c
        .ctrl
        .wait_for(id, Duration::from_secs(20), |j| j["state"] == "PENDING");
    has(
        &j["events"].to_string(),
        &["node nsnode went DOWN", "one of the job's 2 nodes"],
    );
    std::thread::sleep(Duration::from_secs(9));
    let lines = std::fs::read_to_string(&ledger).unwrap();
    assert!(
        !lines.contains("end 0 hostnode"),
        "the part on hostnode ran on after the gang was requeued:\n{lines}"
    );
    ns.restore();
    let j = c.ctrl.wait_done(id, Duration::from_secs(90));
    assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}\n{}", c.logs());
    assert_eq!(j["attempt"], 2, "{j:#}");
    let lines = std::fs::read_to_string(&ledger).unwrap();
    for node in ["hostnode", "nsnode"] {
        has(
            &lines,
            &[&format!("start 1 {node}"), &format!("end 1 {node}")],
        );
    }
    // The cut-off node's part could not be told while the link was down (it is killed when
    // the node rejoins, as a lone node's job is); the part on the node still up was stopped.
    assert!(!lines.contains("end 0 hostnode"), "{lines}");
}

#[test]
fn a_gang_with_an_environment_has_it_put_on_every_node_and_runs_inside_it_there() {
    let test = "a_gang_with_an_environment_has_it_put_on_every_node";
    if !have_path(test, "/usr/share/lmod/lmod/init/bash", "lmod") {
        return;
    }
    let Some((_ns, c)) = two_nodes(test) else {
        return;
    };
    let env = modules_env(&c.ctrl, (0, 0), "tool");
    let id = env["id"].as_str().unwrap();
    // No node has the build: each must be asked to unpack it from its archive.
    std::fs::remove_dir_all(env["dir"].as_str().unwrap()).unwrap();
    let script = c.ctrl.script(
        "gang-env.sh",
        "#!/bin/bash\n#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=1 -o gang-env.out\n\
         #LABPOOL --env tool\n\
         srun bash -c 'echo \"tool=$TOOL_HOME on $SLURMD_NODENAME\"'\n",
    );
    let job = c.ctrl.submit(&[script.to_str().unwrap()]);
    let j = c.ctrl.wait_done(job, T);
    assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}\n{}", c.logs());
    let out = read_output(&c.ctrl.work.join("gang-env.out"));
    // Both nodes were asked, and both answered before it started: one unpacked the build (the
    // nodes of this test share a disk, so the other found it in place).
    let events = j["events"].to_string();
    for node in ["hostnode", "nsnode"] {
        assert!(
            events.contains(&format!("environment {id} unpacked on {node}"))
                || events.contains(&format!("environment {id} already on {node}")),
            "{node} was never asked for the environment: {j:#}"
        );
    }
    has(
        &out,
        &["tool=/opt/tool on hostnode", "tool=/opt/tool on nsnode"],
    );
}
