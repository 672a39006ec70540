//! A node that cannot run jobs is not shown up: an agent killed with -9 is shown not
//! responding (`IDLE*`, sinfo's `idle*`) after a few missed heartbeats and gets no new job,
//! long before `node_timeout`; an agent whose orders cannot be delivered is the same; an agent
//! listening on one address is told apart from the address its connections come from.

use crate::doctor::problems;
use crate::nodes::{Cluster, free_port};
use crate::pool::have_root;
use std::time::{Duration, Instant};

/// Jobs submitted now, none of which may land on `avoid`: each either runs elsewhere or waits.
fn none_placed_on(c: &Cluster, ids: &[u64], avoid: &str) {
    std::thread::sleep(Duration::from_secs(2));
    for id in ids {
        let j = c.ctrl.job(*id);
        assert_ne!(j["node"], avoid, "job {id} was placed on {avoid}: {j:#}");
    }
}

#[test]
fn an_agent_killed_with_9_is_not_responding_within_seconds_and_gets_no_new_job() {
    if !have_root("an_agent_killed_with_9_is_not_responding") {
        return;
    }
    // node_timeout is Slurm-like 5 minutes: the node must be judged long before that.
    let mut c = Cluster::new("127.0.0.1", "5m");
    c.ctrl.start();
    let dead = c.add_agent("gone", "2:t4", "127.0.0.1");
    c.start_agent(dead);
    let live = c.add_agent("live", "2:t4", "127.0.0.1");
    c.start_agent(live);
    c.agents[dead].kill9();
    let t0 = Instant::now();
    let n = c.wait_node("gone", Duration::from_secs(30), |n| {
        n["responding"] == false
    });
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert_eq!(n["state"], "IDLE", "not DOWN yet: {n:#}");
    let reason = n["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("not responding: no heartbeat since")
            && reason.contains("node_timeout (5m)"),
        "{reason}"
    );
    let nodes = c.ctrl.ok(&["nodes"]);
    assert!(
        nodes
            .lines()
            .any(|l| l.starts_with("gone") && l.contains("IDLE*")),
        "{nodes}"
    );
    let sinfo = c.ctrl.slurm("sinfo", &["-N"]);
    assert!(
        sinfo
            .lines()
            .any(|l| l.starts_with("gone") && l.contains("idle*")),
        "{sinfo}"
    );
    let show = c.ctrl.slurm("scontrol", &["show", "node", "gone"]);
    assert!(show.contains("State=IDLE+NOT_RESPONDING"), "{show}");
    let out = c.ctrl.cli(&["doctor", "--json"]);
    let found = problems(&out);
    assert!(
        found
            .iter()
            .any(|(check, status, node, what)| check == "nodes"
                && status == "fail"
                && node == "gone"
                && what.contains("not responding")),
        "{found:?}"
    );
    // Two 2-GPU jobs: one fits on live, the other waits rather than go to the silent node.
    let ids: Vec<u64> = (0..2)
        .map(|_| c.ctrl.submit(&["--gpus", "2", "--wrap", "sleep 30"]))
        .collect();
    none_placed_on(&c, &ids, "gone");
    let waiting = ids
        .iter()
        .find(|id| c.ctrl.job(**id)["state"] == "PENDING")
        .expect("one job waits");
    let why = c.ctrl.ok(&["why", &waiting.to_string()]);
    assert!(
        why.contains("takes no new job: gone (not responding"),
        "{why}"
    );

    // It comes back: it answers again and the waiting job runs there.
    c.agents[dead].spawn();
    let j = c.ctrl.wait_for(*waiting, Duration::from_secs(30), |j| {
        j["state"] == "RUNNING"
    });
    assert_eq!(j["node"], "gone", "{j:#}");
    let n = c.wait_node("gone", Duration::from_secs(5), |n| n["responding"] == true);
    assert_eq!(n["state"], "ALLOCATED");
    for id in ids {
        c.ctrl.ok(&["cancel", &id.to_string()]);
    }
}

/// An agent listening on 127.0.1.4 is told orders there, not at 127.0.0.1 where its
/// connections come from, and its job runs. An agent that advertises an address where nothing
/// listens is shown not responding, with the address and the setting, and takes no job.
#[test]
fn orders_go_where_the_agent_listens_and_a_node_they_cannot_reach_is_not_up() {
    if !have_root("orders_go_where_the_agent_listens") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "5m");
    c.ctrl.start();
    let own = c.add_agent("own", "1:t4", "127.0.1.4");
    c.start_agent(own);
    let n = c.wait_node("own", Duration::from_secs(10), |n| !n["agent"].is_null());
    assert!(
        n["agent"].as_str().unwrap().starts_with("127.0.1.4:"),
        "{n:#}"
    );
    let id = c.ctrl.submit(&["--gpus", "1", "--wrap", "true"]);
    let j = c.ctrl.wait_done(id, Duration::from_secs(30));
    assert_eq!(
        (&j["state"], &j["node"]),
        (&"COMPLETED".into(), &"own".into()),
        "{j:#}"
    );

    let lost = c.add_agent("lost", "2:t4", "127.0.0.1");
    let nowhere = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let config = c.agents[lost].config.clone();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replacen(
            "[agent]\n",
            &format!("[agent]\nadvertise = \"{nowhere}\"\n"),
            1,
        ),
    )
    .unwrap();
    c.agents[lost].spawn();
    // Not up from the start: first its orders wait, then they are found undeliverable.
    let n = c.wait_node("lost", Duration::from_secs(20), |n| !n["agent"].is_null());
    assert_eq!(n["responding"], false, "{n:#}");
    let n = c.wait_node("lost", Duration::from_secs(20), |n| {
        n["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cannot be delivered"))
    });
    assert_eq!(n["responding"], false, "{n:#}");
    let reason = n["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "orders cannot be delivered to its agent at {nowhere}"
        )) && reason.contains("advertise under [agent]"),
        "{reason}"
    );
    let big = c.ctrl.submit(&["--gpus", "2", "--wrap", "true"]);
    none_placed_on(&c, &[big], "lost");
    assert_eq!(c.ctrl.job(big)["state"], "PENDING");
    c.ctrl.ok(&["cancel", &big.to_string()]);
}
