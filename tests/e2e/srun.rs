//! `srun` inside a job: each step starts its tasks with Slurm's rank variables and, with
//! `--gpus-per-task`, its own GPUs; `show` lists the steps with their exit codes. No Slurm is
//! needed on the node: the job's `PATH` starts with labpool's `srun`.

use crate::pool::{Pool, has, read_output, s};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn srun_starts_ranked_tasks_on_their_own_gpus_and_show_lists_the_steps() {
    let mut pool = Pool::new("4:a100");
    pool.start();
    pool.script(
        "steps.sh",
        "#!/bin/bash\n#SBATCH -n 3 --gpus-per-task=1 -o steps.out\n\
         srun -l bash -c 'echo rank=$SLURM_PROCID local=$SLURM_LOCALID node=$SLURM_NODEID step=$SLURM_STEP_ID of=$SLURM_STEP_NUM_TASKS gpus=$CUDA_VISIBLE_DEVICES'\n\
         srun -n 2 bash -c 'exit $((SLURM_PROCID + 3))'; echo second=$?\n\
         srun --mpi=pmix -N 1 --cpu-bind=cores true\n\
         echo nodes=$(scontrol show hostnames)\n\
         srun -N 2 true; echo too-many=$?\n\
         srun -n 4 true; echo over=$?\n",
    );
    let id = pool.submit(&["steps.sh"]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let out = read_output(&pool.work.join("steps.out"));
    let node = s(&job, "node").to_string();
    // Three ranks, each with one GPU of its own, labelled by rank (-l).
    let mut gpus = Vec::new();
    for rank in 0..3 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{rank}: rank={rank} ")))
            .unwrap_or_else(|| panic!("no line of rank {rank} in:\n{out}"));
        has(line, &[&format!("local={rank} node=0 step=0 of=3 gpus=")]);
        gpus.push(line.rsplit("gpus=").next().unwrap().to_string());
    }
    gpus.sort();
    gpus.dedup();
    assert_eq!(gpus.len(), 3, "ranks shared GPUs: {out}");
    assert!(gpus.iter().all(|g| !g.contains(',')), "{out}");
    // The step's exit code is its highest task's; -N 2 on a one-node job is refused.
    has(&out, &["second=4", &format!("nodes={node}"), "too-many=1"]);
    // Four tasks in a three-core job: refused, as Slurm refuses it.
    has(
        &out,
        &[
            "srun: error: More processors requested than permitted: 4 tasks x 1 core on one node, and the job holds 3 cores there",
            "over=1",
        ],
    );
    has(&out, &["srun: warning: --mpi, --cpu-bind ignored"]);

    let steps = job["steps"].as_array().unwrap();
    let summary: Vec<(u64, u64, i64)> = steps
        .iter()
        .map(|st| {
            (
                st["step"].as_u64().unwrap(),
                st["tasks"].as_u64().unwrap(),
                st["exit_code"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, [(0, 3, 0), (1, 2, 4), (2, 3, 0)], "{job:#}");
    let show = pool.ok(&["show", &id.to_string()]);
    has(&show, &["Steps", &format!("{id}.1"), "bash -c", "STEP"]);
}

/// Outside a job, srun makes an allocation for its one step, as Slurm's does: the tasks'
/// output comes back on its own, it exits with their code, and it leaves no file behind.
#[test]
fn srun_outside_a_job_allocates_runs_the_step_and_exits_with_its_code() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let link = pool.dir.join("slurm-bin/srun");
    pool.slurm("sinfo", &["-h"]);
    let run = std::process::Command::new(&link)
        .args(["-n", "2", "-l", "--mpi=pmix", "-G", "1", "sh", "-c"])
        .arg("echo rank=$SLURM_PROCID gpus=$CUDA_VISIBLE_DEVICES; echo to-stderr >&2; exit 4")
        .env("LABPOOL_CONFIG", &pool.config)
        .current_dir(&pool.work)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(4), "{run:?}");
    let (out, err) = (
        String::from_utf8_lossy(&run.stdout).to_string(),
        String::from_utf8_lossy(&run.stderr).to_string(),
    );
    has(&out, &["0: rank=0 gpus=", "1: rank=1 gpus="]);
    has(&err, &["to-stderr"]);
    let (ok, _) = pool.slurm_out("srun", &["true"], true);
    assert!(ok.is_empty(), "{ok}");
    // -J names the job; --out (an abbreviation of --output) is the step's, not the job's.
    let (shown, _) = pool.slurm_out(
        "srun",
        &["-J", "named", "--out=step.txt", "echo", "hi"],
        true,
    );
    assert!(shown.is_empty(), "{shown}");
    assert_eq!(
        std::fs::read_to_string(pool.work.join("step.txt")).unwrap(),
        "hi\n"
    );
    assert!(
        pool.history().iter().any(|j| s(j, "name") == "named"),
        "{:?}",
        pool.history()
    );
    let left: Vec<_> = std::fs::read_dir(&pool.work)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".labpool-srun"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
