//! `submit --test-only` says where and when a job would start, in sbatch's words, and queues
//! nothing; `submit --wait` returns when the job ends, with its exit code.

use crate::pool::{Pool, has, s};
use serde_json::Value;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn test_only_predicts_now_or_the_reservation_and_queues_nothing() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let out = pool.ok(&[
        "submit",
        "--test-only",
        "-n",
        "2",
        "-c",
        "3",
        "--gpus",
        "1",
        "--wrap",
        "true",
    ]);
    // sbatch: "Job N to start at TIME using C processors on nodes NODE in partition P".
    let line = out.trim();
    assert!(line.starts_with("Job 1 to start at "), "{line}");
    has(line, &["using 6 processors on nodes ", " in partition "]);
    assert!(pool.queue().is_empty());

    // Both GPUs busy for 10 minutes: a 2-GPU job would start when that job's limit ends.
    let busy = pool.submit(&["--gpus", "2", "--time", "10", "--wrap", "sleep 60"]);
    pool.wait_for(busy, T, |j| s(j, "state") == "RUNNING");
    let w: Value = serde_json::from_str(&pool.ok(&[
        "submit",
        "--test-only",
        "--json",
        "--gpus",
        "2",
        "--mem-per-gpu",
        "2G",
        "--time",
        "5",
        "--wrap",
        "true",
    ]))
    .unwrap();
    assert_eq!(w["job_id"], busy + 1, "{w:#}");
    assert_eq!(w["gpus"], 2);
    assert_eq!(w["mem_mib"], 4096);
    assert_eq!(w["tasks"], 1);
    assert_eq!(w["nodes"], 1);
    assert_eq!(w["time_limit_s"], 300);
    assert_eq!(w["reason"], "Resources");
    let started = pool.job(busy)["start_time"].as_str().unwrap().to_string();
    let start = |t: &Value| chrono::DateTime::parse_from_rfc3339(t.as_str().unwrap()).unwrap();
    let expected = start(&Value::String(started)) + chrono::Duration::minutes(10);
    let predicted = start(&w["start_time"]);
    assert!(
        (predicted - expected).num_seconds().abs() <= 1,
        "predicted {predicted}, the running job's limit ends {expected}"
    );
    // Nothing was queued; the next real job takes the id the prediction named.
    assert_eq!(pool.queue().len(), 1);
    pool.ok(&["cancel", &busy.to_string()]);

    // What a submit refuses, --test-only refuses in the same words.
    let out = pool.cli(&["submit", "--test-only", "--gpus", "3", "--wrap", "true"]);
    assert!(!out.status.success());
    has(&String::from_utf8_lossy(&out.stderr), &["3 GPUs"]);
}

#[test]
fn wait_returns_when_the_job_ends_with_its_exit_code() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let out = pool.cli(&["submit", "--wait", "--wrap", "sleep 1; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    has(&String::from_utf8_lossy(&out.stdout), &["Submitted job 1"]);
    has(
        &String::from_utf8_lossy(&out.stderr),
        &["job 1 ended FAILED (exit code 3)"],
    );
    assert_eq!(s(&pool.job(1), "state"), "FAILED");
    let out = pool.cli(&["submit", "--wait", "--array", "0-2", "--wrap", "exit 0"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for j in pool.history() {
        if j["array_id"].is_u64() {
            assert_eq!(s(&j, "state"), "COMPLETED");
        }
    }
}
