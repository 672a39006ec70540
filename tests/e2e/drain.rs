//! Draining a node for maintenance: running jobs finish, new ones wait with the reason, the
//! drain survives a controller restart, resume lets them run; only admins may drain, and bad
//! input (an unknown node, an empty reason) changes nothing.

use crate::pool::{Pool, ensure_user, has, have_root, s};
use std::time::Duration;

#[test]
fn a_drained_node_finishes_its_jobs_takes_no_new_ones_and_resumes() {
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let nodes: serde_json::Value = serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap();
    let node = s(&nodes[0], "name").to_string();
    let running = pool.submit(&["--gpus", "1", "--wrap", "sleep 2"]);
    pool.wait_for(running, Duration::from_secs(20), |j| {
        j["state"] == "RUNNING"
    });

    // Bad input first: nothing changes.
    let out = pool.cli(&["node", "drain", "nosuchnode", "--reason", "x"]);
    assert!(!out.status.success());
    has(
        &String::from_utf8_lossy(&out.stderr),
        &["no node \"nosuchnode\"", &node],
    );
    let out = pool.cli(&["node", "drain", &node, "--reason", "  "]);
    assert!(!out.status.success());
    has(&String::from_utf8_lossy(&out.stderr), &["needs a reason"]);
    if have_root("a_drained_node_finishes_its_jobs_takes_no_new_ones_and_resumes (members)") {
        let (uid, gid) = ensure_user("lp-alice");
        let out = pool.cli_as(uid, gid, &["node", "drain", &node, "--reason", "mine"]);
        assert!(!out.status.success());
        has(
            &String::from_utf8_lossy(&out.stderr),
            &["only admins may drain nodes"],
        );
    }
    let nodes: serde_json::Value = serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap();
    assert!(nodes[0]["reason"].is_null(), "{nodes}");

    // Drained: the running job finishes, a new one waits with the reason.
    let out = pool.ok(&["node", "drain", &node, "--reason", "disk swap"]);
    has(&out, &[&node, "DRAINING", "disk swap (by "]);
    let waiting = pool.submit(&["--gpus", "1", "--wrap", "true"]);
    let done = pool.wait_done(running, Duration::from_secs(30));
    assert_eq!(done["state"], "COMPLETED", "{done}");
    let job = pool.wait_for(waiting, Duration::from_secs(10), |j| {
        j["reason_detail"]
            .as_str()
            .is_some_and(|r| r.contains("node-up"))
    });
    assert_eq!(job["state"], "PENDING", "{job}");
    let table = pool.ok(&["nodes"]);
    has(&table, &["DRAINED", "disk swap"]);

    // A restart keeps the drain.
    pool.stop();
    pool.start();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(pool.job(waiting)["state"], "PENDING");
    has(&pool.ok(&["nodes"]), &["DRAINED", "disk swap"]);

    // Resumed: the waiting job runs.
    let out = pool.ok(&["node", "resume", &node, "--json"]);
    let view: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(view["reason"].is_null(), "{view}");
    let done = pool.wait_done(waiting, Duration::from_secs(30));
    assert_eq!(done["state"], "COMPLETED", "{done}");
}
