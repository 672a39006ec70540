//! Several nodes: real `labpool agent` processes on loopback joined to one controller.

use crate::nodes::Cluster;
use crate::pool::{have_root, wait_until};
use std::time::Duration;

/// Three agents with 4 GPUs each: three 3-GPU jobs land one per node; a 4-GPU job waits, since
/// no node has 4 free, and lands exactly on the node whose job is cancelled.
#[test]
fn jobs_spread_over_three_agents_and_a_4_gpu_job_lands_only_where_4_are_free() {
    if !have_root("jobs_spread_over_three_agents") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    for name in ["node1", "node2", "node3"] {
        let i = c.add_agent(name, "4:t4", "127.0.0.1");
        c.start_agent(i);
    }
    let nodes = c.nodes();
    assert_eq!(nodes.len(), 3, "{nodes:#?}");
    std::thread::sleep(Duration::from_millis(600));
    let text = c.ctrl.ok(&["nodes"]);
    for name in ["node1", "node2", "node3"] {
        assert!(
            text.contains(&format!("{name} agent: 127.0.0.1:")),
            "{text}"
        );
    }
    assert!(
        text.contains(", load "),
        "heartbeats carry the load: {text}"
    );
    let mut ids = Vec::new();
    for k in 0..3 {
        ids.push(c.ctrl.submit(&[
            "--gpus",
            "3",
            "-o",
            &format!("three-{k}.out"),
            "--wrap",
            "echo node=$LABPOOL_NODE gpus=$CUDA_VISIBLE_DEVICES; sleep 60",
        ]));
    }
    let mut on = Vec::new();
    for id in &ids {
        let j = c
            .ctrl
            .wait_for(*id, Duration::from_secs(20), |j| j["state"] == "RUNNING");
        on.push(j["node"].as_str().unwrap().to_string());
    }
    let mut distinct = on.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct,
        ["node1", "node2", "node3"],
        "one per node: {on:?}"
    );
    let big = c.ctrl.submit(&[
        "--gpus",
        "4",
        "-o",
        "big.out",
        "--wrap",
        "echo node=$LABPOOL_NODE",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    let j = c.ctrl.job(big);
    assert_eq!(j["state"], "PENDING", "no node has 4 GPUs free: {j:#}");
    // Free node2: the big job goes there and nowhere else.
    let on_node2 = ids[on.iter().position(|n| n == "node2").unwrap()];
    c.ctrl.ok(&["cancel", &on_node2.to_string()]);
    let j = c.ctrl.wait_done(big, Duration::from_secs(30));
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", c.logs());
    assert_eq!(j["node"], "node2", "{j:#}");
    let out = std::fs::read_to_string(c.ctrl.work.join("big.out")).unwrap();
    assert_eq!(out.trim(), "node=node2");
    // Each job saw its node's name and 3 GPUs numbered on its node.
    for (k, node) in on.iter().enumerate() {
        let out = std::fs::read_to_string(c.ctrl.work.join(format!("three-{k}.out"))).unwrap();
        assert!(out.starts_with(&format!("node={node} gpus=")), "{out}");
    }
    for id in ids {
        let _ = c.ctrl.cli(&["cancel", &id.to_string()]);
    }
}

/// An agent killed with -9 while its job runs: the shim keeps the job running, the restarted
/// agent re-adopts it, and the job's true end (exit 0, after the kill) is recorded once.
#[test]
fn an_agent_killed_with_9_re_adopts_its_running_job() {
    if !have_root("an_agent_killed_with_9_re_adopts_its_running_job") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let i = c.add_agent("solo", "2:t4", "127.0.0.1");
    c.start_agent(i);
    let marker = c.ctrl.work.join("readopt.ledger");
    let id = c.ctrl.submit(&[
        "--gpus",
        "1",
        "--wrap",
        &format!(
            "echo start $LABPOOL_ATTEMPT >> {m}; sleep 4; echo end $LABPOOL_ATTEMPT >> {m}; exit 3",
            m = marker.display()
        ),
    ]);
    c.ctrl
        .wait_for(id, Duration::from_secs(20), |j| j["state"] == "RUNNING");
    wait_until(
        Duration::from_secs(10),
        || marker.exists(),
        || "the job never started",
    );
    c.agents[i].kill9();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(c.ctrl.job(id)["state"], "RUNNING");
    c.agents[i].spawn();
    let j = c.ctrl.wait_done(id, Duration::from_secs(30));
    assert_eq!(j["state"], "FAILED", "{j:#}\n{}", c.logs());
    assert_eq!(j["exit_code"], 3, "the script's own exit code: {j:#}");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "start 1\nend 1\n",
        "one attempt, run to its end"
    );
    assert!(
        c.agents[i].log().contains("re-adopted running job"),
        "{}",
        c.agents[i].log()
    );
}
