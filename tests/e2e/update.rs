//! `labpool update` and `scontrol update`: a waiting job's time limit, partition and
//! dependencies change through the same admission as a submit, are kept across a restart, and
//! a running job is left as it is; `labpool requeue` stops a running job and queues it again.

use crate::pool::{Pool, fails_stderr, has, s};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn a_waiting_job_is_updated_as_a_submit_would_be_admitted_and_kept() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let blocker = pool.submit(&["--gpus", "1", "--wrap", "sleep 60"]);
    pool.wait_for(blocker, T, |j| s(j, "state") == "RUNNING");
    let id = pool.submit(&["--gpus", "1", "--time", "10", "--wrap", "true"]);
    let job = id.to_string();

    let out = pool.ok(&["update", &job, "--time", "5", "--partition", "debug"]);
    has(
        &out,
        &[&format!(
            "job {id} updated: Partition=debug TimeLimit=5:00 by "
        )],
    );
    let j = pool.job(id);
    assert_eq!(
        (s(&j, "partition"), j["time_limit_s"].as_u64()),
        ("debug", Some(300))
    );

    // What a submit to debug would be refused for, an update is refused for; nothing changes.
    let err = fails_stderr(&pool, &["update", &job, "--time", "2:00:00"]);
    has(&err, &["debug"]);
    let err = fails_stderr(&pool, &["update", &blocker.to_string(), "--time", "1"]);
    has(
        &err,
        &[&format!(
            "job {blocker} is RUNNING; only a waiting job can be updated"
        )],
    );
    assert_eq!(pool.job(id)["time_limit_s"].as_u64(), Some(300));

    // scontrol's spelling; the new dependency holds the job.
    let status = std::process::Command::new(bin.join("scontrol"))
        .args([
            "update",
            &format!("JobId={id}"),
            "TimeLimit=3",
            &format!("Dependency=afterok:{blocker}"),
        ])
        .env("LABPOOL_CONFIG", &pool.config)
        .status()
        .unwrap();
    assert!(status.success());
    pool.stop();
    pool.start();
    let j = pool.wait_for(id, T, |j| j["reason"] == "Dependency");
    assert_eq!(j["time_limit_s"].as_u64(), Some(180), "{j:#}");
    assert_eq!(s(&j, "dependency"), format!("afterok:{blocker}"));
    let show = pool.ok(&["show", &job]);
    has(
        &show,
        &[
            "update",
            "Partition=debug TimeLimit=5:00",
            "TimeLimit=3:00 Dependency=",
        ],
    );
    // Cleared, it runs once the GPU is free.
    pool.ok(&["update", &job, "--dependency", ""]);
    pool.ok(&["cancel", &blocker.to_string()]);
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");
}

#[test]
fn requeue_stops_a_running_job_and_runs_it_again_as_a_new_attempt() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    pool.script(
        "again.sh",
        "#!/bin/bash\n#SBATCH -o again.out --open-mode=append --gres=gpu:1\necho attempt=$LABPOOL_ATTEMPT\n\
         [ \"$LABPOOL_ATTEMPT\" = 2 ] && exit 0\nsleep 60\n",
    );
    let id = pool.submit(&["again.sh"]);
    pool.wait_for(id, T, |j| s(j, "state") == "RUNNING");
    std::thread::sleep(Duration::from_millis(2200));
    let out = pool.ok(&["requeue", &id.to_string()]);
    has(&out, &[&format!("job {id} is being requeued")]);
    let job = pool.wait_done(id, T);
    assert_eq!(
        (s(&job, "state"), job["attempt"].as_u64()),
        ("COMPLETED", Some(2)),
        "{job:#}"
    );
    let log = crate::pool::read_output(&pool.work.join("again.out"));
    assert_eq!(log, "attempt=1\nattempt=2\n");
    has(
        &pool.ok(&["show", &id.to_string()]),
        &["requested by", "requeued by"],
    );
    // The first attempt is charged for the time it held its GPU (2 s and more), as an end is.
    let credits: serde_json::Value =
        serde_json::from_str(&pool.ok(&["credits", "--json"])).unwrap();
    assert!(
        credits["charged"].as_f64().unwrap() > 0.0,
        "{credits:#}\n{}",
        pool.serve_log()
    );

    // Only a running job, and not one submitted with --no-requeue.
    let err = fails_stderr(&pool, &["requeue", &id.to_string()]);
    has(&err, &[&format!("job {id} already ended (COMPLETED)")]);
    let once = pool.submit(&["--no-requeue", "--wrap", "sleep 30"]);
    pool.wait_for(once, T, |j| s(j, "state") == "RUNNING");
    let err = fails_stderr(&pool, &["requeue", &once.to_string()]);
    has(&err, &["--no-requeue; cancel it instead"]);
    pool.ok(&["cancel", &once.to_string()]);
}
