//! A job's life: submit, queue, run with its GPUs and environment, end, history.

use crate::pool::{Pool, read_line, read_output, runs, s, stdout_of, wait_until};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

#[test]
fn submit_runs_with_directives_and_shows_in_history() {
    let mut pool = Pool::new("4:rtx4090");
    pool.start();
    pool.script(
        "train.sh",
        "#!/bin/bash\n#SBATCH --job-name=resnet --gres=gpu:rtx4090:2\n#SBATCH -o logs-%x-%j.out\n#LABPOOL --time=10:00\n\
         echo \"cvd=$CUDA_VISIBLE_DEVICES lp=$LABPOOL_GPUS slurm=$SLURM_JOB_ID name=$SLURM_JOB_NAME\"\n\
         echo \"args=$*\" \"pwd=$(pwd)\" \"foo=$FOO\" \"order=$CUDA_DEVICE_ORDER\"\n",
    );
    // The command line wins over the script: 1 GPU, not 2.
    let out = pool
        .command(&["submit", "--gpus", "1", "train.sh", "--lr", "3e-4"])
        .env("FOO", "from-submit-env")
        .env("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        .output()
        .unwrap();
    let stdout = stdout_of(&out);
    let id: u64 = stdout
        .trim()
        .strip_prefix("Submitted job ")
        .expect("Submitted job N")
        .parse()
        .unwrap();

    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    assert_eq!(job["exit_code"], 0);
    assert_eq!(s(&job, "name"), "resnet");
    assert_eq!(job["gpus"].as_array().unwrap().len(), 1);
    assert_eq!(job["time_limit_s"], 600);
    for key in [
        "id",
        "name",
        "user",
        "state",
        "reason",
        "node",
        "gpus",
        "exit_code",
        "submit_time",
        "start_time",
        "end_time",
    ] {
        assert!(job.get(key).is_some(), "show --json lacks {key}: {job:#}");
    }
    let gpu = job["gpus"][0].as_u64().unwrap();
    let output = read_output(&pool.work.join(format!("logs-resnet-{id}.out")));
    // The submitter's stale CUDA_VISIBLE_DEVICES is replaced by the allocation.
    assert!(
        output.contains(&format!("cvd={gpu} lp={gpu} slurm={id} name=resnet")),
        "{output}"
    );
    assert!(output.contains("args=--lr 3e-4"), "{output}");
    assert!(
        output.contains(&format!("pwd={}", pool.work.display())),
        "{output}"
    );
    assert!(output.contains("foo=from-submit-env"), "{output}");
    assert!(output.contains("order=PCI_BUS_ID"), "{output}");

    assert!(pool.queue().is_empty());
    let history = pool.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["id"], id);
    assert_eq!(s(&history[0], "state"), "COMPLETED");
    let table = pool.ok(&["history"]);
    assert!(
        table.lines().next().unwrap().starts_with("JOBID"),
        "{table}"
    );
    assert!(
        table.contains("resnet") && table.contains("COMPLETED"),
        "{table}"
    );
    // GPUS is a count, as in `queue`; the indexes go with the node.
    assert!(
        table.contains(" 1 ") && table.contains(&format!("[{gpu}]")),
        "{table}"
    );
    let shown = pool.ok(&["show", &id.to_string()]);
    assert!(
        shown.contains(&format!("1 asked; holds GPU {gpu} on ")),
        "{shown}"
    );
    let since_tomorrow: Vec<serde_json::Value> =
        serde_json::from_str(&pool.ok(&["history", "--since", "2099-01-01", "--json"])).unwrap();
    assert!(since_tomorrow.is_empty());
    // A user nobody has is an error, not an empty list that looks like "no jobs".
    let out = pool.cli(&["history", "--user", "nobody-here", "--json"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no user \"nobody-here\" on this host"));
}

#[test]
fn export_none_keeps_only_named_variables_and_separate_error_file() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    let out = pool
        .command(&[
            "submit",
            "--parsable",
            "--export=NONE,KEEP=yes",
            "-e",
            "err-%j.txt",
            "-o",
            "out-%j.txt",
            "--wrap",
            "echo \"secret=$SECRET keep=$KEEP home=$HOME\"; echo oops >&2",
        ])
        .env("SECRET", "do-not-pass")
        .output()
        .unwrap();
    let id: u64 = stdout_of(&out).trim().parse().unwrap();
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
    let o = read_output(&pool.work.join(format!("out-{id}.txt")));
    assert!(o.contains("secret= keep=yes home=/"), "{o}");
    assert_eq!(
        read_output(&pool.work.join(format!("err-{id}.txt"))).trim(),
        "oops"
    );
}

#[test]
fn nonzero_exit_is_failed_with_its_code() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let id = pool.submit(&["--wrap", "echo bad; exit 3"]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "FAILED");
    assert_eq!(job["exit_code"], 3);
    let sig = pool.submit(&["--wrap", "kill -9 $$"]);
    let job = pool.wait_done(sig, T);
    assert_eq!(s(&job, "state"), "FAILED");
    assert_eq!(job["signal"], 9);
}

#[test]
fn time_limit_sends_term_then_kill_and_ends_in_timeout() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    // The script ignores TERM, so only KILL (after the 1 s grace) ends it.
    let id = pool.submit(&[
        "--time",
        "0:01",
        "--wrap",
        "trap 'echo got-term' TERM; while true; do sleep 0.1; done",
    ]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "TIMEOUT", "{job:#}");
    assert_eq!(job["signal"], 9);
    let elapsed = job["elapsed_s"].as_u64().unwrap();
    assert!((2..=6).contains(&elapsed), "elapsed {elapsed}");
    let out = read_output(&pool.work.join(format!("labpool-{id}.out")));
    assert!(out.contains("got-term"), "{out}");
    assert!(
        job["reason_detail"]
            .as_str()
            .unwrap()
            .contains("time limit"),
        "{job:#}"
    );
}

#[test]
fn cancel_running_and_pending_jobs() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let running = pool.submit(&[
        "--gpus",
        "1",
        "--wrap",
        "echo $$ > pid-$LABPOOL_JOB_ID; sleep 60",
    ]);
    let pending = pool.submit(&["--gpus", "1", "--wrap", "echo never"]);
    pool.wait_for(running, T, |j| s(j, "state") == "RUNNING");
    let pid_file = pool.work.join(format!("pid-{running}"));
    let pid: i32 = read_line(&pid_file).trim().parse().unwrap();
    let queued = pool.job(pending);
    assert_eq!(s(&queued, "state"), "PENDING");
    assert_eq!(s(&queued, "reason"), "Resources");

    let out = pool.ok(&["cancel", &pending.to_string(), &running.to_string()]);
    assert!(out.contains(&format!("job {pending} cancelled")), "{out}");
    assert!(
        out.contains(&format!("job {running} is being stopped")),
        "{out}"
    );
    let job = pool.wait_done(running, T);
    assert_eq!(s(&job, "state"), "CANCELLED");
    assert_eq!(s(&job, "reason_detail"), "cancelled by root");
    assert_eq!(s(&pool.job(pending), "state"), "CANCELLED");
    // The job's processes are gone, not left behind as zombie jobs.
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err(),
        "pid {pid} still alive"
    );
    // Cancelling again says why not, and fails.
    let again = pool.cli(&["cancel", &running.to_string()]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already ended (CANCELLED)"));
}

#[test]
fn listings_print_tables_and_json() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let a = pool.submit(&["--gpus", "2", "-J", "holder", "--wrap", "sleep 30"]);
    let b = pool.submit(&["--gpus", "a100:1", "-J", "waiter", "--wrap", "true"]);
    pool.wait_for(a, T, |j| s(j, "state") == "RUNNING");
    pool.wait_for(b, T, |j| s(j, "reason") == "Resources");
    let q = pool.ok(&["queue"]);
    let header = q.lines().next().unwrap();
    assert!(
        header.starts_with("JOBID") && header.contains("NODE(REASON)"),
        "{q}"
    );
    assert!(q.contains("holder") && q.contains("RUNNING"), "{q}");
    assert!(
        q.contains("(Resources: 0/1 nodes fit: 1 gpus-free; reserved on "),
        "{q}"
    );
    let jobs = pool.queue();
    assert_eq!(
        jobs.iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [a, b]
    );
    let mine: Vec<serde_json::Value> =
        serde_json::from_str(&pool.ok(&["queue", "--me", "--json"])).unwrap();
    assert_eq!(mine.len(), 2);

    let nodes: Vec<serde_json::Value> =
        serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(s(&nodes[0], "state"), "ALLOCATED");
    assert_eq!(s(&nodes[0], "gpu_source"), "virtual");
    assert_eq!(nodes[0]["gpus"][0]["gpu_type"], "a100");
    assert_eq!(nodes[0]["gpus"][1]["job"], a);
    let table = pool.ok(&["nodes"]);
    assert!(
        table.contains("ALLOCATED") && table.contains(&format!("job {a}")),
        "{table}"
    );
    let parts = pool.ok(&["partition", "list"]);
    assert!(
        parts.contains("normal*") && parts.contains("7-00:00:00"),
        "{parts}"
    );
    let show = pool.ok(&["show", &b.to_string()]);
    assert!(
        show.contains("Resources: 0/1 nodes fit: 1 gpus-free; reserved on"),
        "{show}"
    );
    pool.ok(&["cancel", &a.to_string(), &b.to_string()]);
}

#[test]
fn finished_job_leaves_no_process_behind_and_secrets_stay_private() {
    use std::os::unix::fs::PermissionsExt;
    let mut pool = Pool::new("1:t4");
    pool.start();
    // A process that leaves the job's process group still carries the job's identity.
    let id = pool.submit(&[
        "--wrap",
        "setsid sleep 300 & echo $! > escaped-$LABPOOL_JOB_ID; sleep 1",
    ]);
    pool.wait_for(id, T, |j| s(j, "state") == "RUNNING");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let spec = pool.dir.join(format!("state/spool/jobs/{id}.1/spec.json"));
    assert_eq!(mode(&spec), 0o600, "the spec holds the job's environment");
    assert_eq!(mode(&pool.dir.join("state/labpool.db")), 0o600);
    assert_eq!(mode(&pool.dir.join("state")), 0o711);
    // The shell creates the file before `echo` fills it: wait for the number itself.
    let escaped = pool.work.join(format!("escaped-{id}"));
    let t0 = std::time::Instant::now();
    let pid: i32 = loop {
        if let Ok(pid) = read_output(&escaped).trim().parse() {
            break pid;
        }
        assert!(t0.elapsed() < T, "{} stayed empty", escaped.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
    wait_until(
        Duration::from_secs(5),
        || !runs(pid),
        || format!("the setsid'd process {pid} outlived its job"),
    );
}
