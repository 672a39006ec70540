//! Trust between nodes: the cluster key, the clock-skew window, replays, and the CLI forwarded
//! by an agent with the caller's uid vouched for.

use crate::nodes::{Cluster, http};
use crate::pool::{ensure_user, have_root};
use std::io::{Read, Write};
use std::time::Duration;

fn signed_ping(key: &labpool_cluster::ClusterKey, nonce: &str, at_ms: i64) -> String {
    let sig = key.sign(
        &labpool_cluster::Request {
            method: "GET",
            path: "/v1/ping",
            body: b"",
            uid: Some(0),
        },
        at_ms,
        nonce,
    );
    format!(
        "GET /v1/ping HTTP/1.1\r\nhost: x\r\nconnection: close\r\nx-labpool-timestamp: {}\r\nx-labpool-nonce: {}\r\nx-labpool-signature: {}\r\nx-labpool-uid: 0\r\nx-labpool-body-sha256: {}\r\n\r\n",
        sig.timestamp_ms,
        sig.nonce,
        sig.mac,
        labpool_cluster::body_sha256(b"")
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A signed request is taken once; the same bytes again are refused as a replay; an unsigned
/// one and one signed with another key are refused with what to do.
#[test]
fn replayed_unsigned_and_wrongly_keyed_requests_are_refused() {
    if !have_root("replayed_unsigned_and_wrongly_keyed_requests_are_refused") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let key = labpool_cluster::ClusterKey::load(&c.ctrl.dir.join("cluster.key")).unwrap();
    let req = signed_ping(&key, "test-nonce-1", now_ms());
    let (status, body) = http(&c.join, &req, b"");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"you\":\"root\""), "{body}");
    let (status, body) = http(&c.join, &req, b"");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("replay"), "{body}");

    let (status, body) = http(
        &c.join,
        "GET /v1/ping HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("not signed with the cluster key"), "{body}");

    let other = labpool_cluster::ClusterKey::from_bytes([7u8; 32]);
    let (status, body) = http(&c.join, &signed_ping(&other, "n2", now_ms()), b"");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("different cluster key"), "{body}");
    assert!(c.ctrl.serve_log().contains("refused a request"));
}

/// An agent holding another key is refused at registration: it exits saying so, and the
/// controller's log says it refused a request with the wrong key.
#[test]
fn an_agent_with_the_wrong_key_is_refused_on_both_sides() {
    if !have_root("an_agent_with_the_wrong_key_is_refused_on_both_sides") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let i = c.add_agent("wrongkey", "1:t4", "127.0.0.1");
    let key = c.agents[i].dir.join("cluster.key");
    std::fs::remove_file(&key).unwrap();
    labpool_cluster::ClusterKey::from_bytes([9u8; 32])
        .write_new(&key)
        .unwrap();
    c.agents[i].spawn();
    let status = c.agents[i].wait_exit(Duration::from_secs(20));
    assert!(!status.success());
    let log = c.agents[i].log();
    assert!(log.contains("refused node wrongkey"), "{log}");
    assert!(log.contains("different cluster key"), "{log}");
    assert!(
        c.ctrl.serve_log().contains("different cluster key"),
        "{}",
        c.ctrl.serve_log()
    );
    assert!(c.nodes().is_empty(), "{:#?}", c.nodes());
}

/// An agent whose clock is 10 minutes behind (faked through the test hook, not the system
/// clock) is refused with the measured skew and the fix, on both sides.
#[test]
fn an_agent_10_minutes_behind_is_refused_with_the_skew_in_the_message() {
    if !have_root("an_agent_10_minutes_behind_is_refused") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let i = c.add_agent("skewed", "1:t4", "127.0.0.1");
    c.agents[i]
        .env
        .push(("LABPOOL_TEST_CLOCK_OFFSET_MS".into(), "-600000".into()));
    c.agents[i].spawn();
    let status = c.agents[i].wait_exit(Duration::from_secs(20));
    assert!(!status.success());
    let log = c.agents[i].log();
    for want in [
        "behind this node's",
        "beyond the 300 s window",
        "timedatectl set-ntp true; chronyc sources",
    ] {
        assert!(log.contains(want), "{want:?} missing:\n{log}");
    }
    // 10 minutes, give or take the milliseconds between signing and checking.
    assert!(
        log.contains("10 min 0 s") || log.contains("9 min 59 s"),
        "{log}"
    );
    assert!(c.ctrl.serve_log().contains("behind this node's"));
}

/// A member's CLI on an agent node goes through the agent's socket: the controller sees the
/// member's own uid (the job is theirs, and they may not cancel root's job), and node-only
/// paths are refused at the agent.
#[test]
fn a_members_cli_on_an_agent_node_is_forwarded_with_their_uid() {
    if !have_root("a_members_cli_on_an_agent_node_is_forwarded_with_their_uid") {
        return;
    }
    let (uid, gid) = ensure_user("lp-alice");
    let mut c = Cluster::new("127.0.0.1", "30s").for_users();
    c.ctrl.start();
    let i = c.add_agent("worker", "2:t4", "127.0.0.1");
    c.start_agent(i);
    let agent_config = c.agents[i].config.clone();
    let run_as = |uid: u32, gid: u32, args: &[&str]| {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--init-groups".to_string(),
        ])
        .arg(&c.ctrl.bin)
        .args(args)
        .env("LABPOOL_CONFIG", &agent_config)
        .current_dir(&c.ctrl.work);
        cmd.output().unwrap()
    };
    let out = run_as(
        uid,
        gid,
        &["submit", "--parsable", "--gpus", "1", "--wrap", "id -un"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let j = c.ctrl.wait_done(id, Duration::from_secs(30));
    assert_eq!(j["user"], "lp-alice", "{j:#}");
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", c.logs());
    let root_job = c.ctrl.submit(&["--gpus", "1", "--wrap", "sleep 30"]);
    let out = run_as(uid, gid, &["cancel", &root_job.to_string()]);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("may cancel only your own jobs"), "{text}");
    c.ctrl.ok(&["cancel", &root_job.to_string()]);

    // Node-only paths through the CLI socket: refused by the agent.
    let sock = c.agents[i].dir.join("labpool.sock");
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.write_all(b"POST /v1/agent/reports HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("is for nodes, not for the CLI"), "{out}");
}
