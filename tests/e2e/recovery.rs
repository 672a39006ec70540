//! `kill -9` the controller while jobs run and others wait: after a restart every job ends in
//! its true state, and none is lost or run twice.

use crate::pool::{Pool, read_line, read_output, runs, s, wait_until};
use std::time::Duration;

#[test]
fn controller_crash_loses_no_job_and_runs_none_twice() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    // Each run appends a line, so a job that ran twice shows two lines.
    let run = |secs: &str, code: u8| {
        format!("echo run >> runs-$LABPOOL_JOB_ID; sleep {secs}; exit {code}")
    };
    let short = pool.submit(&["--gpus", "1", "--wrap", &run("0.5", 0)]);
    let long = pool.submit(&["--gpus", "1", "--wrap", &run("4", 5)]);
    let waiting: Vec<u64> = (0..3)
        .map(|_| pool.submit(&["--gpus", "1", "--wrap", &run("0.3", 0)]))
        .collect();
    let timed = pool.submit(&[
        "--gpus",
        "1",
        "-t",
        "0:02",
        "--wrap",
        "trap '' TERM; sleep 30",
    ]);
    pool.wait_for(long, Duration::from_secs(20), |j| {
        s(j, "state") == "RUNNING"
    });
    pool.wait_for(short, Duration::from_secs(20), |j| {
        s(j, "state") == "RUNNING"
    });

    pool.kill9();
    // While the controller is down, the short job ends; its shim keeps the status.
    std::thread::sleep(Duration::from_millis(1500));
    pool.start();

    let short_job = pool.wait_done(short, Duration::from_secs(20));
    assert_eq!(s(&short_job, "state"), "COMPLETED");
    let long_job = pool.wait_done(long, Duration::from_secs(20));
    assert_eq!(s(&long_job, "state"), "FAILED", "{long_job:#}");
    assert_eq!(
        long_job["exit_code"], 5,
        "the re-adopted job's true exit code"
    );
    for &id in &waiting {
        assert_eq!(
            s(&pool.wait_done(id, Duration::from_secs(30)), "state"),
            "COMPLETED"
        );
    }
    let t = pool.wait_done(timed, Duration::from_secs(30));
    assert_eq!(s(&t, "state"), "TIMEOUT");
    for id in [short, long].iter().chain(&waiting) {
        let runs = read_output(&pool.work.join(format!("runs-{id}")));
        assert_eq!(
            runs.lines().count(),
            1,
            "job {id} ran {} times",
            runs.lines().count()
        );
        assert_eq!(pool.job(*id)["attempt"], 1);
    }
    assert!(pool.queue().is_empty());
    assert_eq!(pool.history().len(), 6);
    // Finished jobs' spool directories are cleaned up.
    let left = std::fs::read_dir(pool.dir.join("state/spool/jobs"))
        .unwrap()
        .count();
    assert_eq!(left, 0);
}

#[test]
fn second_controller_on_the_same_state_is_refused() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let out = pool.cli(&["serve"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another labpool controller"), "{err}");
    // The first one still answers.
    pool.ok(&["queue"]);
}

#[test]
fn attempt_that_never_started_is_requeued_not_lost() {
    // A RUNNING row whose attempt never got a shim (the controller died between committing the
    // start and launching it) must run again, once.
    let mut pool = Pool::new("1:t4");
    pool.start();
    let id = pool.submit(&["--gpus", "1", "--wrap", "echo run >> runs-$LABPOOL_JOB_ID"]);
    pool.wait_done(id, Duration::from_secs(20));
    pool.stop();
    let db = pool.dir.join("state/labpool.db");
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
        let url = format!("sqlite://{}", db.display());
        let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.unwrap();
        let sql = format!(
            "UPDATE jobs SET state = 'RUNNING', node = (SELECT name FROM nodes), gpus = '0', attempt = 7, end_time = NULL WHERE id = {id}"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
    });
    pool.start();
    let job = pool.wait_for(id, Duration::from_secs(20), |j| {
        j["attempt"] == 8 && s(j, "state") == "COMPLETED"
    });
    let runs = read_output(&pool.work.join(format!("runs-{id}")));
    assert_eq!(
        runs.lines().count(),
        2,
        "once before, once after the requeue"
    );
    let show = pool.ok(&["show", &id.to_string()]);
    assert!(
        show.contains("requeue") && show.contains("the start order was lost"),
        "{show}\n{job:#}"
    );
}

#[test]
fn a_dead_shim_ends_its_job_kills_its_processes_and_frees_the_gpu() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let first = pool.submit(&[
        "--gpus",
        "1",
        "--wrap",
        "echo $$ > pid-$LABPOOL_JOB_ID; sleep 60",
    ]);
    let second = pool.submit(&["--gpus", "1", "--wrap", "true"]);
    pool.wait_for(first, Duration::from_secs(20), |j| {
        s(j, "state") == "RUNNING"
    });
    let pid: i32 = read_line(&pool.work.join(format!("pid-{first}")))
        .trim()
        .parse()
        .unwrap();
    let lock = pool.dir.join(format!("state/spool/jobs/{first}.1/lock"));
    let shim: i32 = read_output(&lock).trim().parse().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shim),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let job = pool.wait_done(first, Duration::from_secs(20));
    assert_eq!(s(&job, "state"), "FAILED", "{job:#}");
    assert!(s(&job, "reason_detail").contains("shim died"), "{job:#}");
    assert_eq!(
        s(&pool.wait_done(second, Duration::from_secs(20)), "state"),
        "COMPLETED"
    );
    assert!(!runs(pid), "the job's script {pid} outlived its shim");
}

/// The controller restarts with a configuration that no longer has a running job's GPUs: the
/// job ends NODE_FAIL (through the lifecycle, like every end), its script is killed by the node's
/// fence, and the GPU left is free for the next job.
#[test]
fn a_running_job_whose_gpus_left_the_configuration_ends_node_fail() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    let big = pool.submit(&[
        "--gpus",
        "2",
        "--wrap",
        "echo $$ > pid-$LABPOOL_JOB_ID; sleep 60",
    ]);
    pool.wait_for(big, Duration::from_secs(20), |j| s(j, "state") == "RUNNING");
    let pid: i32 = read_line(&pool.work.join(format!("pid-{big}")))
        .trim()
        .parse()
        .unwrap();
    pool.kill9();
    pool.edit_config(|t| t.replace("virtual_gpus = \"2:t4\"", "virtual_gpus = \"1:t4\""));
    pool.start();
    let job = pool.wait_done(big, Duration::from_secs(20));
    assert_eq!(s(&job, "state"), "NODE_FAIL", "{job:#}");
    assert!(
        s(&job, "reason_detail").contains("GPU 1 no longer exists"),
        "{job:#}"
    );
    let next = pool.submit(&["--gpus", "1", "--wrap", "true"]);
    assert_eq!(
        s(&pool.wait_done(next, Duration::from_secs(20)), "state"),
        "COMPLETED"
    );
    wait_until(
        Duration::from_secs(10),
        || !runs(pid),
        || format!("the script {pid} of the ended job still runs"),
    );
    assert_eq!(pool.history().len(), 2);
}

#[test]
fn a_cancel_survives_a_controller_crash() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    // The job ignores TERM, so it is still running (in its grace period) when the controller dies.
    let id = pool.submit(&["--wrap", "trap '' TERM; sleep 60"]);
    pool.wait_for(id, Duration::from_secs(20), |j| s(j, "state") == "RUNNING");
    pool.ok(&["cancel", &id.to_string()]);
    pool.kill9();
    pool.start();
    let job = pool.wait_done(id, Duration::from_secs(20));
    assert_eq!(s(&job, "state"), "CANCELLED", "{job:#}");
    assert_eq!(s(&job, "reason_detail"), "cancelled by root");
}

/// A database that is gone or empty while the state directory held a pool stops the start,
/// with how to recover; an empty pool starts only when asked for on purpose.
#[test]
fn a_lost_database_is_not_silently_replaced_by_an_empty_pool() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let job = pool.submit(&["--wrap", "true"]);
    pool.wait_done(job, Duration::from_secs(20));
    pool.stop();
    let state = pool.dir.join("state");
    let serve = |pool: &Pool| {
        let out = pool
            .command(&["serve"])
            .output()
            .expect("labpool serve runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (what, lose) in [("empty (0 bytes)", true), ("missing", false)] {
        for wal in ["labpool.db-wal", "labpool.db-shm"] {
            let _ = std::fs::remove_file(state.join(wal));
        }
        if lose {
            std::fs::write(state.join("labpool.db"), b"").unwrap();
        } else {
            let _ = std::fs::remove_file(state.join("labpool.db"));
        }
        let (ok, err) = serve(&pool);
        assert!(!ok, "serve started over a lost database:\n{err}");
        for part in [what, "held a pool", "Restore labpool.db", "pool-started"] {
            assert!(err.contains(part), "{part:?} not in:\n{err}");
        }
    }
    std::fs::remove_file(state.join("pool-started")).unwrap();
    pool.start();
    assert!(pool.history().is_empty());
}

/// A submit whose answer is lost to a crash after the commit is sent again by the CLI with the
/// same idempotency key once the controller is back, and gets the first job back: the job is
/// queued and run once.
#[test]
fn a_submit_retried_after_a_lost_answer_queues_the_job_once() {
    use std::process::Stdio;
    let mut pool = Pool::new("1:t4");
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(pool.dir.join("serve.out"))
            .unwrap()
    };
    let mut crashing = pool
        .command(&["serve"])
        .env("LABPOOL_TEST_CRASH_AFTER_SUBMIT", "1")
        .stdin(Stdio::null())
        .stdout(log())
        .stderr(log())
        .spawn()
        .unwrap();
    wait_until(
        Duration::from_secs(20),
        || pool.cli(&["queue"]).status.success(),
        || pool.serve_log(),
    );
    let submit = pool
        .command(&["submit", "--wrap", "echo ran >> runs.txt"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let crashed = crashing.wait().unwrap();
    assert!(!crashed.success(), "{}", pool.serve_log());
    assert!(
        pool.serve_log()
            .contains("aborting after committing a submit")
    );
    std::thread::sleep(Duration::from_secs(1));
    pool.start();
    let out = submit.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Submitted job 1"), "{stdout}");
    assert!(
        stderr.contains("trying again with the same submit id"),
        "{stderr}"
    );
    let done = pool.wait_done(1, Duration::from_secs(20));
    assert_eq!(s(&done, "state"), "COMPLETED");
    assert!(pool.queue().is_empty());
    assert_eq!(pool.history().len(), 1, "queued once");
    assert_eq!(read_output(&pool.work.join("runs.txt")).lines().count(), 1);

    // Through the API: the same key twice is one job; another key is another job.
    let sock = pool.dir.join("labpool.sock");
    let body = |key: &str| {
        serde_json::json!({
            "name": "k", "script": "#!/bin/sh\ntrue\n", "workdir": pool.work,
            "gpus": 0, "cpus": 1, "mem_mib": 0, "umask": 18, "idempotency_key": key,
        })
    };
    let (_, first) = crate::pool::post_raw(&sock, "/v1/jobs", &body("same"));
    let (_, again) = crate::pool::post_raw(&sock, "/v1/jobs", &body("same"));
    let (_, other) = crate::pool::post_raw(&sock, "/v1/jobs", &body("other"));
    assert_eq!(first["job_id"], again["job_id"], "{first} {again}");
    assert_ne!(first["job_id"], other["job_id"]);
}
