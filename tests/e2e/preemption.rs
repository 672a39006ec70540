//! Preemption through the real binary, with real processes: an overdrawn member's job on a
//! lent GPU checkpoints on its notice and resumes after an in-credit member's job has run, each
//! step once; an emergency job on a full pool takes a `--preemptible` job's GPU within the
//! grace, and `why` and `show` say who preempted whom.

use crate::pool::{Pool, ensure_user, has, have_root, read_output, s, stdout_of};
use serde_json::Value;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// Short enough for a test: a notice, 3 s of grace, and preemption allowed after 2 s.
fn short_preemption(pool: &Pool) {
    pool.edit_config(|t| {
        t.replace("grace = \"2m\"", "grace = \"3s\"")
            .replace("min_runtime = \"10m\"", "min_runtime = \"2s\"")
    });
}

fn ms(v: &Value, key: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s(v, key))
        .unwrap_or_else(|e| panic!("{key} of {v:#}: {e}"))
        .timestamp_millis()
}

/// A job that counts 12 steps of 0.4 s, resuming from its checkpoint file; on its notice
/// (TERM) it saves the next step, shows the notice file, and exits.
const CHECKPOINTING: &str = r#"#!/bin/bash
ck="$PWD/ckpt-$SLURM_JOB_ID"
step=$(cat "$ck" 2>/dev/null || echo 0)
echo "attempt $LABPOOL_ATTEMPT starts at step $step"
stop=0
trap 'stop=1' TERM
while [ "$step" -lt 12 ]; do
  if [ "$stop" = 1 ]; then
    echo "$step" > "$ck"
    echo "checkpoint at step $step: $(cat "$LABPOOL_PREEMPT_NOTICE")"
    exit 0
  fi
  echo "step $step"
  step=$((step + 1))
  sleep 0.4
done
echo "all steps done"
"#;

#[test]
fn an_overdrawn_job_checkpoints_on_its_notice_and_resumes_after_the_in_credit_job() {
    if !have_root("an_overdrawn_job_checkpoints_on_its_notice_and_resumes_after_the_in_credit_job")
    {
        return;
    }
    let (alice, gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:t4").for_users();
    pool.edit_config(|t| t.replace("monthly_grant = 1000", "monthly_grant = 0"));
    short_preemption(&pool);
    pool.start();
    pool.ok(&["credits", "grant", "lp-alice", "100", "--note", "thesis"]);
    // Root has no credit: its job runs on the idle GPU, preemptibly.
    let script = pool.script("ckpt.sh", CHECKPOINTING);
    let script = script.to_str().unwrap();
    let borrowed = pool.submit(&["--gpus", "1", "--open-mode=append", script]);
    pool.wait_for(borrowed, T, |j| s(j, "state") == "RUNNING");
    std::thread::sleep(Duration::from_millis(2500));
    let submitted = Instant::now();
    let out = pool.cli_as(
        alice,
        gid,
        &["submit", "--parsable", "--gpus", "1", "--wrap", "sleep 1"],
    );
    let fresh: u64 = stdout_of(&out).trim().parse().unwrap();
    let f = pool.wait_for(fresh, T, |j| s(j, "state") != "PENDING");
    assert!(
        submitted.elapsed() < Duration::from_secs(3 + 30),
        "the in-credit job started {:?} after its submit",
        submitted.elapsed()
    );
    assert_eq!(s(&f, "state"), "RUNNING", "{f:#}");
    // The preempted job waits for it, then resumes from its checkpoint.
    let b = pool.job(borrowed);
    assert_eq!(s(&b, "state"), "PENDING", "{b:#}");
    assert_eq!(s(&b, "reason"), "Preempted", "{b:#}");
    let f = pool.wait_done(fresh, T);
    let b = pool.wait_done(borrowed, T);
    assert_eq!(s(&b, "state"), "COMPLETED");
    assert!(ms(&b, "start_time") >= ms(&f, "start_time"));
    let output = read_output(&pool.work.join(format!("labpool-{borrowed}.out")));
    has(
        &output,
        &[
            "attempt 1 starts at step 0",
            &format!("preempted for job {fresh}: save your work and exit"),
            "attempt 2 starts at step",
            "all steps done",
        ],
    );
    for step in 0..12 {
        let n = output
            .lines()
            .filter(|l| *l == format!("step {step}"))
            .count();
        assert_eq!(n, 1, "step {step} ran {n} times:\n{output}");
    }
    let show = pool.ok(&["show", &borrowed.to_string()]);
    has(
        &show,
        &[
            &format!("notice given: preempted for job {fresh} (root is overdrawn)"),
            "attempt 2",
        ],
    );
    // Charged for the time each attempt ran: two charges, the first "then requeued".
    let c: Value = serde_json::from_str(&pool.ok(&["credits", "--json"])).unwrap();
    let notes: Vec<&str> = c["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["job"] == borrowed)
        .map(|e| e["note"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(notes.len(), 2, "{c:#}");
    assert!(
        notes.iter().any(|n| n.ends_with("then requeued")),
        "{notes:?}"
    );
}

#[test]
fn an_emergency_job_takes_a_preemptible_jobs_gpu_within_the_grace() {
    let mut pool = Pool::new("1:t4");
    short_preemption(&pool);
    pool.start();
    // It ignores TERM: it is stopped when the grace ends (TERM, then KILL after kill_grace).
    let cheap = pool.submit(&[
        "--gpus",
        "1",
        "--preemptible",
        "--wrap",
        "trap '' TERM; while true; do sleep 1; done",
    ]);
    pool.wait_for(cheap, T, |j| s(j, "state") == "RUNNING");
    has(
        &pool.ok(&["why", &cheap.to_string()]),
        &["preemptible (submitted --preemptible)"],
    );
    std::thread::sleep(Duration::from_millis(2500));
    let submitted = Instant::now();
    let urgent = pool.submit(&[
        "--gpus",
        "1",
        "--emergency",
        "--time",
        "10:00",
        "--wrap",
        "true",
    ]);
    let waiting = pool.wait_for(urgent, T, |j| {
        s(j, "reason_detail").contains("preempting") || s(j, "state") != "PENDING"
    });
    assert!(
        s(&waiting, "reason_detail")
            .contains(&format!("preempting job {cheap} (submitted --preemptible)")),
        "{waiting:#}"
    );
    has(
        &pool.ok(&["why", &urgent.to_string()]),
        &[&format!("job {cheap} (submitted --preemptible)")],
    );
    let u = pool.wait_for(urgent, T, |j| s(j, "state") != "PENDING");
    let took = submitted.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(3 + 30),
        "the emergency job started {took:?} after its submit"
    );
    assert!(matches!(s(&u, "state"), "RUNNING" | "COMPLETED"), "{u:#}");
    pool.wait_done(urgent, T);
    // The preempted job is back in the queue as a new attempt; it runs again.
    let c = pool.wait_for(cheap, T, |j| {
        j["attempt"] == 2 && s(j, "state") == "RUNNING"
    });
    assert_eq!(s(&c, "state"), "RUNNING");
    pool.ok(&["cancel", &cheap.to_string()]);
    pool.wait_done(cheap, T);
}

#[test]
fn an_account_borrows_an_idle_gpu_beyond_its_share_only_when_it_may() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    pool.ok(&["account", "add", "vision"]);
    pool.ok(&["account", "add-user", "vision", "root"]);
    pool.ok(&["qos", "set", "vision", "GrpTRES=gres/gpu=1"]);
    let job = || pool.submit(&["-A", "vision", "--gpus", "1", "--wrap", "sleep 60"]);
    let (first, second) = (job(), job());
    pool.wait_for(first, T, |j| s(j, "state") == "RUNNING");
    pool.wait_for(second, T, |j| s(j, "reason") == "AssocGrpGRES");
    // Opened to borrowing, the second runs on the idle GPU, marked as borrowing.
    pool.ok(&["qos", "set", "vision", "BorrowLimit=gres/gpu=1"]);
    pool.wait_for(second, T, |j| s(j, "state") == "RUNNING");
    has(
        &pool.ok(&["why", &second.to_string()]),
        &["preemptible (borrowing beyond account vision's GrpTRES share)"],
    );
    let why_first = pool.ok(&["why", &first.to_string()]);
    assert!(!why_first.contains("preemptible"), "{why_first}");
    has(
        &pool.ok(&["qos", "list"]),
        &["GrpTRES=gres/gpu=1", "BorrowLimit=gres/gpu=1"],
    );
    for id in [first, second] {
        pool.ok(&["cancel", &id.to_string()]);
    }
}
