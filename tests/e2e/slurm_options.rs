//! sbatch's options as real GPU scripts use them: the signal before the time limit, the output
//! open mode, Slurm's per-task and per-GPU arithmetic, directive lines written without a
//! space, and every problem of a script reported in one go.

use crate::pool::{Pool, fails_stderr, has, read_output, s, wait_until};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn signal_with_b_reaches_the_batch_shell_before_the_time_limit() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    // A limit of 1 minute and the signal 90 s before it (submitit's timeout_min=1): as on
    // Slurm, whose check runs every 30 s, it comes some seconds in, never at the start.
    pool.script(
        "ckpt.sh",
        "#!/bin/bash\n#SBATCH --time=1 --signal=B:USR1@90 -o ckpt.out\n\
         trap 'echo checkpoint-on-usr1; exit 0' USR1\necho started\n\
         while true; do sleep 0.2; done\n",
    );
    let id = pool.submit(&["ckpt.sh"]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let out = read_output(&pool.work.join("ckpt.out"));
    has(&out, &["started", "checkpoint-on-usr1"]);
    let ran = job["elapsed_s"].as_u64().unwrap();
    assert!((12..=25).contains(&ran), "signalled after {ran} s: {job:#}");
}

#[test]
fn signal_without_b_reaches_the_job_processes_and_not_the_batch_shell() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    pool.script(
        "steps.sh",
        "#!/bin/bash\n#SBATCH --time=1 --signal=USR2@57 -o steps.out\n\
         trap 'echo shell-got-usr2' USR2\n\
         sh -c 'trap \"echo step-got-usr2; exit 7\" USR2; while :; do sleep 0.2; done' &\n\
         wait $!; code=$?\n\
         # The shell's own trap would have cut the wait short with 128+12.\n\
         echo step-exit=$code\n",
    );
    let id = pool.submit(&["steps.sh"]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let out = read_output(&pool.work.join("steps.out"));
    has(&out, &["step-got-usr2", "step-exit=7"]);
    assert!(!out.contains("shell-got-usr2"), "{out}");
}

#[test]
fn open_mode_append_keeps_what_the_file_held_and_truncate_does_not() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    for (mode, file) in [("append", "kept.out"), ("truncate", "fresh.out")] {
        std::fs::write(pool.work.join(file), "from an earlier run\n").unwrap();
        let id = pool.submit(&[
            &format!("--open-mode={mode}"),
            "-o",
            file,
            "--wrap",
            "echo this run",
        ]);
        assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
    }
    let kept = read_output(&pool.work.join("kept.out"));
    assert_eq!(kept, "from an earlier run\nthis run\n");
    let fresh = read_output(&pool.work.join("fresh.out"));
    assert_eq!(fresh, "this run\n");
}

#[test]
fn per_task_and_per_gpu_options_add_up_as_in_slurm() {
    let mut pool = Pool::new("4:a100");
    pool.start();
    // 2 tasks x 2 GPUs each = 4 GPUs; 3 cores and 1 GiB per GPU.
    pool.script(
        "ddp.sh",
        "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --gpus-per-task=a100:2\n\
         #SBATCH --cpus-per-gpu=3\n#SBATCH --mem-per-gpu=1G\n#SBATCH--time=2:00\n\
         echo \"gpus=$CUDA_VISIBLE_DEVICES\"\n",
    );
    let id = pool.submit(&["ddp.sh"]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    assert_eq!(job["gpus_requested"], 4, "{job:#}");
    assert_eq!(job["gpus"].as_array().unwrap().len(), 4);
    assert_eq!(job["cpus"], 12);
    assert_eq!(job["mem_mib"], 4096);
    // `#SBATCH--time=2:00` is read, as sbatch reads it: 2 minutes, not the partition's default.
    assert_eq!(job["time_limit_s"], 120);

    // A type with no count is one GPU of that type, as `--gres=gpu:a100` is.
    let id = pool.submit(&[
        "--gpus-per-node=a100",
        "--mem-per-cpu=100M",
        "-c",
        "2",
        "--wrap",
        "true",
    ]);
    let job = pool.wait_done(id, T);
    assert_eq!(job["gpus_requested"], 1, "{job:#}");
    assert_eq!(s(&job, "gpu_type"), "a100");
    assert_eq!(job["mem_mib"], 200);
}

#[test]
fn every_problem_of_a_script_is_reported_in_one_go_and_nothing_is_queued() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    pool.script(
        "bad.sh",
        "#!/bin/bash\n#SBATCH --gres=gpu:2\n#SBATCH --gpus-per-node=4\n\
         #SBATCH --time=forever\n#SBATCH --mem=lots --cpus-per-task=0\n\
         #SBATCH --signal=USR9\n#SBATCH --uid=1000\npython train.py\n",
    );
    let err = fails_stderr(&pool, &["submit", "bad.sh", "--open-mode=sideways"]);
    has(
        &err,
        &[
            "problems:",
            // The two GPU requests, each named with its line.
            "line 3: #SBATCH --gpus-per-node=4",
            "after line 2 (#SBATCH --gres=gpu:2)",
            "line 4:",
            "line 5:",
            "line 6:",
            "--uid",
            "--open-mode \"sideways\"",
            "hint: fix them all",
        ],
    );
    assert!(pool.queue().is_empty());
    assert!(pool.history().is_empty());
}

#[test]
fn options_that_mean_nothing_here_are_accepted_with_one_line_each() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    pool.script(
        "site.sh",
        "#!/bin/bash\n#SBATCH --comment=\"paper run\" --get-user-env\n\
         #SBATCH -L matlab:1 --clusters=gpu\ntrue\n",
    );
    let out = pool.command(&["submit", "site.sh"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    has(&err, &["--licenses", "--clusters"]);
    // The comment and --get-user-env mean something: the comment is kept with the job, and
    // neither is warned about.
    assert!(
        !err.contains("--comment") && !err.contains("--get-user-env"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
    let job = pool.job(1);
    assert_eq!(s(&job, "comment"), "paper run", "{job:#}");
    has(&pool.ok(&["show", "1"]), &["comment     paper run"]);
}

#[test]
fn singleton_waits_for_the_earlier_job_of_its_name() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let first = pool.submit(&["-J", "train", "--wrap", "sleep 30"]);
    pool.wait_for(first, T, |j| s(j, "state") == "RUNNING");
    let second = pool.submit(&["-J", "train", "--dependency=singleton", "--wrap", "true"]);
    let other = pool.submit(&["-J", "eval", "--dependency=singleton", "--wrap", "true"]);
    assert_eq!(s(&pool.wait_done(other, T), "state"), "COMPLETED");
    let job = pool.job(second);
    assert_eq!(s(&job, "state"), "PENDING", "{job:#}");
    assert_eq!(s(&job, "reason"), "Dependency");
    has(
        s(&job, "reason_detail"),
        &[&format!("singleton (job {first} has its name)")],
    );
    pool.ok(&["cancel", &first.to_string()]);
    assert_eq!(s(&pool.wait_done(second, T), "state"), "COMPLETED");
}

#[test]
fn constraint_nodelist_and_exclude_pick_among_the_nodes_and_refuse_what_is_not_there() {
    let mut pool = Pool::new("2:a100");
    pool.edit_config(|t| {
        t.replace(
            "# features = [\"a100\", \"ib\"]",
            "features = [\"a100\", \"ib\"]",
        )
    });
    pool.start();
    let nodes: serde_json::Value = serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap();
    let node = s(&nodes[0], "name").to_string();
    let id = pool.submit(&["-C", "a100&ib", "-w", &node, "--wrap", "true"]);
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");

    let err = fails_stderr(
        &pool,
        &["submit", "--constraint=a100&h100", "--wrap", "true"],
    );
    has(&err, &["h100", "features here: a100 (", "ib ("]);
    let err = fails_stderr(&pool, &["submit", "--nodelist=gn[7-8]", "--wrap", "true"]);
    has(
        &err,
        &[
            "--nodelist names nodes that are not in the pool: gn7, gn8",
            &node,
        ],
    );
    let err = fails_stderr(&pool, &["submit", "-x", &node, "--wrap", "true"]);
    has(
        &err,
        &["no node in partition normal matches --exclude", "hint:"],
    );
    let err = fails_stderr(&pool, &["submit", "-C", "a100*2", "--wrap", "true"]);
    has(&err, &["node counts per feature"]);
    assert_eq!(pool.history().len(), 1);
}

#[test]
fn a_signal_reaches_the_steps_or_the_batch_shell_and_the_job_goes_on() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    pool.script(
        "traps.sh",
        "#!/bin/bash\n#SBATCH -o traps.out\n\
         trap 'echo shell-got-usr1' USR1\n\
         sh -c 'trap \"echo step-got-usr2\" USR2; touch step-ready; while [ ! -e stop ]; do sleep 0.1; done' &\n\
         while [ ! -e stop ]; do sleep 0.1; done; wait; echo done\n",
    );
    let id = pool.submit(&["traps.sh"]);
    pool.wait_for(id, T, |j| s(j, "state") == "RUNNING");
    // Both traps are set once the step says so (the shell's comes first).
    wait_until(
        T,
        || pool.work.join("step-ready").exists(),
        || "the step never started",
    );
    let out = pool.ok(&["cancel", "--signal", "USR2", &id.to_string()]);
    has(
        &out,
        &[&format!(
            "job {id}: SIGUSR2 sent to its steps' tasks (not its batch shell or srun)"
        )],
    );
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let status = std::process::Command::new(bin.join("scancel"))
        .args(["-b", "-s", "USR1", &id.to_string()])
        .env("LABPOOL_CONFIG", &pool.config)
        .status()
        .unwrap();
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        s(&pool.job(id), "state"),
        "RUNNING",
        "a signal does not end the job"
    );
    std::fs::write(pool.work.join("stop"), "").unwrap();
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
    let out = read_output(&pool.work.join("traps.out"));
    has(&out, &["step-got-usr2", "shell-got-usr1", "done"]);
    assert!(!out.contains("shell-got-usr2"), "{out}");
    let err = fails_stderr(&pool, &["cancel", "--signal", "USR1", &id.to_string()]);
    has(&err, &[&format!("job {id} is not running")]);
}

/// `--get-user-env`: the job starts from its owner's login environment (their `~/.profile`),
/// with what was submitted over it; without the option, the profile is not read.
#[test]
fn get_user_env_loads_the_login_environment_under_the_submitted_one() {
    let test = "get_user_env_loads_the_login_environment";
    if !crate::pool::have_root(test) || !crate::pool::have_tool(test, "su") {
        return;
    }
    let (uid, gid) = crate::pool::ensure_user("lp-getenv");
    let home = tempfile::Builder::new()
        .prefix("lp-getenv-home-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(
        home.path().join(".profile"),
        "export LABPOOL_LOGIN_MARK=from-profile\nexport KEPT=login\n",
    )
    .unwrap();
    for p in [home.path().to_path_buf(), home.path().join(".profile")] {
        nix::unistd::chown(
            &p,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .unwrap();
    }
    let moved = std::process::Command::new("usermod")
        .arg("-d")
        .arg(home.path())
        .arg("lp-getenv")
        .status()
        .unwrap();
    assert!(moved.success());
    let mut pool = Pool::new("1:a100").for_users();
    pool.start();
    let submit = |extra: &[&str], out: &str| -> u64 {
        let mut args = vec![
            "submit",
            "--parsable",
            "--export=NONE,KEPT=submitted",
            "-o",
            out,
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--wrap", "echo mark=$LABPOOL_LOGIN_MARK kept=$KEPT"]);
        let o = pool.cli_as(uid, gid, &args);
        assert!(o.status.success(), "{o:?}");
        crate::pool::stdout_of(&o).trim().parse().unwrap()
    };
    let with = submit(&["--get-user-env"], "with.out");
    let without = submit(&[], "without.out");
    for id in [with, without] {
        let j = pool.wait_done(id, T);
        assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}");
    }
    has(
        &read_output(&pool.work.join("with.out")),
        &["mark=from-profile kept=submitted"],
    );
    has(
        &read_output(&pool.work.join("without.out")),
        &["mark= kept=submitted"],
    );
}
