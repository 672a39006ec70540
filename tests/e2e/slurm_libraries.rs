//! What the Python libraries that drive Slurm's commands (submitit, snakemake's executor) rely
//! on, each as the library does it: a log folder named after the job id made just after
//! `sbatch` returns, per-rank logs from `srun --output`, a signal that reaches the tasks and
//! leaves `srun` to report their end, Slurm's file name patterns, `#SBATCH --parsable`.

use crate::pool::{Pool, has, read_output, s, wait_until};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// submitit's `.submitit/%j` folder: the job starts within a millisecond of `sbatch`, before
/// the folder is there; it waits for it instead of failing.
#[test]
fn a_log_folder_made_after_sbatch_returns_is_waited_for() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let logs = pool.work.join("logs");
    std::fs::create_dir(&logs).unwrap();
    let out = pool.slurm(
        "sbatch",
        &[
            "--parsable",
            "-o",
            "logs/%j/%j_0_log.out",
            "--wrap",
            "echo ran-in-its-folder",
        ],
    );
    let id: u64 = out.trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::create_dir(logs.join(id.to_string())).unwrap();
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let log = read_output(&logs.join(format!("{id}/{id}_0_log.out")));
    has(&log, &["ran-in-its-folder"]);
}

/// submitit runs its function under `srun --unbuffered --output %j_%t_log.out --error
/// %j_%t_log.err`: each rank writes its own files, and `srun` says nothing of the options.
#[test]
fn srun_output_and_error_give_each_rank_its_files() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    std::fs::create_dir(pool.work.join("out")).unwrap();
    pool.script(
        "ranks.sh",
        "#!/bin/bash\n#SBATCH -n 2 -o batch.out --open-mode=append\n\
         srun --unbuffered --output out/%j_%t_log.out --error out/%j_%t_log.err \
         sh -c 'echo out-$SLURM_PROCID; echo err-$SLURM_PROCID >&2'\n\
         srun -o out/step-%s-%2t.txt sh -c 'echo both-$SLURM_PROCID; echo both-err-$SLURM_PROCID >&2'\n\
         srun -o none echo hidden\n\
         echo batch-done\n",
    );
    let id = pool.submit(&["ranks.sh"]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let read = |name: String| read_output(&pool.work.join("out").join(name));
    for rank in 0..2 {
        assert_eq!(
            read(format!("{id}_{rank}_log.out")),
            format!("out-{rank}\n")
        );
        assert_eq!(
            read(format!("{id}_{rank}_log.err")),
            format!("err-{rank}\n")
        );
        // Without --error, standard error goes with --output; %2t pads the rank.
        let both = read(format!("step-1-0{rank}.txt"));
        has(
            &both,
            &[&format!("both-{rank}"), &format!("both-err-{rank}")],
        );
    }
    let batch = read_output(&pool.work.join("batch.out"));
    assert_eq!(batch.trim(), "batch-done", "{batch}");
}

/// `scancel -s USR1` (and `--signal` without `B:`) reaches the step's tasks, never `srun`: the
/// task's handler runs and `srun` reports its exit code, which submitit's checkpoint-and-requeue
/// needs (it died with 138 when `srun` was signalled too).
#[test]
fn a_signal_reaches_the_tasks_and_srun_reports_their_end() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    pool.script(
        "handler.sh",
        "#!/bin/bash\n#SBATCH -o handler.out\n\
         srun sh -c 'trap \"echo task-got-usr1; exit 3\" USR1; touch ready; while :; do sleep 0.1; done'\n\
         echo srun-exit=$?\n",
    );
    let id = pool.submit(&["handler.sh"]);
    wait_until(
        T,
        || pool.work.join("ready").exists(),
        || "the task never started",
    );
    pool.slurm("scancel", &["-s", "USR1", &id.to_string()]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let out = read_output(&pool.work.join("handler.out"));
    has(&out, &["task-got-usr1", "srun-exit=3"]);
}

/// `#SBATCH --parsable` is read as on the command line, and the batch output's name takes
/// Slurm's `%J`, `%s` and zero padding.
#[test]
fn sbatch_options_in_directives_and_slurm_file_patterns() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    pool.script(
        "quiet.sh",
        "#!/bin/bash\n#SBATCH --parsable\n#SBATCH -o p-%12j-%J-%s-%t.out\necho patterned\n",
    );
    let out = pool.slurm("sbatch", &["quiet.sh"]);
    let id: u64 = out
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a bare id: {out:?}"));
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let name = format!("p-{id:010}-{id}.4294967291-4294967291-0.out");
    has(&read_output(&pool.work.join(&name)), &["patterned"]);
}
