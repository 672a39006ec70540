//! A node may speak only for itself and for the attempts it runs: a holder of the cluster key
//! who registers a node of its own cannot end, or requeue, a job running on another node.

use crate::nodes::{Cluster, registration, signed_post};
use crate::pool::{has, have_root};
use labpool::api::agent::{AgentReport, Outcome, ReportBatch};
use labpool_scheduler::JobState;
use std::time::Duration;

fn ended(node: &str, job: u64) -> AgentReport {
    AgentReport::Ended {
        node: node.into(),
        job,
        attempt: 1,
        outcome: Outcome::decided(JobState::Completed, 0, "forged".into()),
        steps: vec![labpool::api::steps::StepRecord {
            step: 0,
            name: "forged".into(),
            tasks: 1,
            nodes: vec![node.into()],
            start_ms: 0,
            end_ms: 0,
            exit_code: 0,
            signal: None,
        }],
    }
}

#[test]
fn a_node_cannot_end_or_requeue_a_job_that_runs_on_another_node() {
    if !have_root("a_node_cannot_end_or_requeue_a_job_that_runs_on_another_node") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let i = c.add_agent("node1", "2:t4", "127.0.0.1");
    c.start_agent(i);
    c.nodes();
    let pid_file = c.ctrl.dir.join("victim.pid");
    let job = c.ctrl.submit(&[
        "--gpus",
        "2",
        "--wrap",
        &format!("echo $$ > {}; sleep 120", pid_file.display()),
    ]);
    c.ctrl
        .wait_for(job, Duration::from_secs(20), |j| j["state"] == "RUNNING");
    let key = labpool_cluster::ClusterKey::load(&c.ctrl.dir.join("cluster.key")).unwrap();

    // The attacker holds the key and registers a node of its own.
    let reg = registration("evil", labpool::api::versions::THIS);
    let (status, body) = signed_post(
        &key,
        &c.join,
        "/v1/agent/register",
        &serde_json::to_vec(&reg).unwrap(),
    );
    assert_eq!(status, 200, "{body}");

    // It reports the job's end in node1's name, then in its own, then that it never started.
    let batches = [
        vec![ended("node1", job)],
        vec![ended("evil", job)],
        vec![AgentReport::NeverStarted {
            node: "evil".into(),
            job,
            attempt: 1,
            why: None,
        }],
    ];
    for (seq, reports) in batches.into_iter().enumerate() {
        let batch = ReportBatch {
            node: "evil".into(),
            instance: reg.instance.clone(),
            seq: seq as u64 + 1,
            reports,
        };
        let (status, body) = signed_post(
            &key,
            &c.join,
            "/v1/agent/reports",
            &serde_json::to_vec(&batch).unwrap(),
        );
        assert_eq!(status, 200, "{body}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let j = c.ctrl.job(job);
    assert_eq!(j["state"], "RUNNING", "{j:#}");
    assert_eq!(j["attempt"], 1, "{j:#}");
    assert_eq!(j["node"], "node1", "{j:#}");
    assert_eq!(
        j["steps"],
        serde_json::json!([]),
        "forged steps were kept: {j:#}"
    );
    let pid: i32 = crate::pool::read_line(&pid_file).trim().parse().unwrap();
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok(),
        "the job's process was killed"
    );
    let log = c.ctrl.serve_log();
    has(
        &log,
        &[
            "refused a report that node evil sent about node node1",
            "the attempt runs on node node1, not on the node that reported it",
        ],
    );
    c.ctrl.ok(&["cancel", &job.to_string()]);
}
