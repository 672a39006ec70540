//! Faults across nodes: a link cut between real network namespaces, and a controller killed
//! with -9 under a load of 1,000 jobs on 3 agents.

use crate::netns::cluster_with_agent_inside;
use crate::nodes::Cluster;
use crate::pool::{have_root, have_tool, wait_until};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One agent in a network namespace, reached over a veth pair. Its link is cut: it goes DOWN
/// with the reason, its requeueable job runs again on the other node and its `--no-requeue`
/// job ends NODE_FAIL. The link comes back: it rejoins, and its copies of both jobs are killed
/// there before they finish, so no job runs to its end twice.
#[test]
fn a_node_cut_off_goes_down_its_jobs_requeue_elsewhere_and_it_rejoins_without_a_second_run() {
    let test = "a_node_cut_off_goes_down";
    if !have_root(test) || !have_tool(test, "ip") {
        return;
    }
    let (ns, mut c, a) = cluster_with_agent_inside("2s", "nsnode", "4:t4");
    c.start_agent(a);
    let ledger = c.ctrl.work.join("ledger");
    std::fs::create_dir(&ledger).unwrap();
    let script = format!(
        "echo start $LABPOOL_ATTEMPT $LABPOOL_NODE >> {l}/$LABPOOL_JOB_ID; sleep 12; echo end $LABPOOL_ATTEMPT $LABPOOL_NODE >> {l}/$LABPOOL_JOB_ID",
        l = ledger.display()
    );
    let again = c.ctrl.submit(&["--gpus", "2", "--wrap", &script]);
    let once = c
        .ctrl
        .submit(&["--gpus", "2", "--no-requeue", "--wrap", &script]);
    for id in [again, once] {
        let j = c
            .ctrl
            .wait_for(id, Duration::from_secs(20), |j| j["state"] == "RUNNING");
        assert_eq!(j["node"], "nsnode");
    }
    wait_until(
        Duration::from_secs(10),
        || ledger.join(again.to_string()).exists() && ledger.join(once.to_string()).exists(),
        || "jobs never started",
    );
    let h = c.add_agent("hostnode", "4:t4", &ns.host_ip);
    c.start_agent(h);

    ns.cut();
    let n = c.wait_node("nsnode", Duration::from_secs(15), |n| n["state"] == "DOWN");
    let reason = n["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("no heartbeat since"), "{reason}");
    assert!(reason.contains("node_timeout 2s"), "{reason}");
    let j = c
        .ctrl
        .wait_for(once, Duration::from_secs(10), |j| j["state"] != "RUNNING");
    assert_eq!(j["state"], "NODE_FAIL", "{j:#}");
    assert!(
        j["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("--no-requeue")
            || j.to_string().contains("--no-requeue"),
        "{j:#}"
    );
    let j = c.ctrl.wait_for(again, Duration::from_secs(20), |j| {
        j["state"] == "RUNNING" && j["node"] == "hostnode"
    });
    assert_eq!(j["attempt"], 2, "{j:#}");

    ns.restore();
    c.wait_node("nsnode", Duration::from_secs(20), |n| n["state"] != "DOWN");
    let j = c.ctrl.wait_done(again, Duration::from_secs(40));
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", c.logs());
    assert_eq!(j["node"], "hostnode");
    // The cut-off node's copies were killed when it rejoined, before their 12 s were up.
    let again_lines = std::fs::read_to_string(ledger.join(again.to_string())).unwrap();
    assert_eq!(
        again_lines,
        "start 1 nsnode\nstart 2 hostnode\nend 2 hostnode\n",
        "{}",
        c.logs()
    );
    std::thread::sleep(Duration::from_secs(2));
    let once_lines = std::fs::read_to_string(ledger.join(once.to_string())).unwrap();
    assert_eq!(once_lines, "start 1 nsnode\n", "{}", c.logs());
    assert!(
        c.agents[a]
            .log()
            .contains("stopping a job the controller no longer expects here"),
        "{}",
        c.agents[a].log()
    );
    // The node takes jobs again.
    let after = c
        .ctrl
        .submit(&["--gpus", "4", "--wrap", "echo $LABPOOL_NODE"]);
    let j = c.ctrl.wait_done(after, Duration::from_secs(30));
    assert_eq!(j["state"], "COMPLETED", "{j:#}");
}

/// 1,000 jobs (an array) on 3 agents; the controller is killed with -9 while they run. After
/// its restart the agents register again and every job is accounted for: each task COMPLETED
/// exactly once, each task's script ran exactly once, nothing left queued.
#[test]
fn a_controller_killed_with_9_under_1000_jobs_loses_and_duplicates_nothing() {
    if !have_root("a_controller_killed_with_9_under_1000_jobs") {
        return;
    }
    const TASKS: usize = 1000;
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    for name in ["n1", "n2", "n3"] {
        let i = c.add_agent(name, "4:t4", "127.0.0.1");
        c.start_agent(i);
    }
    let ledger = c.ctrl.work.join("ledger");
    let array = c.ctrl.submit(&[
        "--array",
        &format!("0-{}", TASKS - 1),
        "--gpus",
        "1",
        "-o",
        "/dev/null",
        "--wrap",
        &format!(
            "sleep 0.1; echo $SLURM_ARRAY_TASK_ID $LABPOOL_ATTEMPT $LABPOOL_NODE >> {}",
            ledger.display()
        ),
    ]);
    let lines = || {
        std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let t0 = Instant::now();
    while lines() < 150 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "only {} tasks ran\n{}",
            lines(),
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    c.ctrl.kill9();
    let at_kill = lines();
    std::thread::sleep(Duration::from_secs(1));
    c.ctrl.start();
    let t0 = Instant::now();
    loop {
        let q = c.ctrl.queue();
        if q.is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "{} jobs still queued after the restart\n{}",
            q.len(),
            c.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let history = c.ctrl.history();
    let tasks: Vec<&serde_json::Value> = history
        .iter()
        .filter(|j| j["array_id"] == array || j["id"] == array)
        .collect();
    assert_eq!(tasks.len(), TASKS, "every task recorded once");
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for j in &tasks {
        *states
            .entry(j["state"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(states.get("COMPLETED"), Some(&TASKS), "{states:?}");
    let text = std::fs::read_to_string(&ledger).unwrap();
    let mut runs: BTreeMap<u32, usize> = BTreeMap::new();
    for l in text.lines() {
        let task: u32 = l.split_whitespace().next().unwrap().parse().unwrap();
        *runs.entry(task).or_default() += 1;
    }
    assert_eq!(runs.len(), TASKS, "every task ran");
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "tasks that ran twice: {twice:?}");
    assert!(
        at_kill < TASKS,
        "the kill came while jobs were still queued"
    );
    eprintln!("killed with {at_kill} of {TASKS} tasks run");
}
