//! The agent port reads no body before the signature checks out: an unsigned request with a
//! huge body is refused at once and costs the controller nothing, and a signed one is held to
//! its route's limit.

use crate::nodes::Cluster;
use crate::pool::have_root;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The controller's resident memory, kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Sends `head` and then up to `body_len` bytes of `x` (stopping when the server closes);
/// returns what came back, or what was read before the timeout.
fn post_streaming(addr: &str, head: &str, body_len: usize, timeout: Duration) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_write_timeout(Some(timeout)).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0;
    while sent < body_len {
        if s.write_all(&chunk[..chunk.len().min(body_len - sent)])
            .is_err()
        {
            break;
        }
        sent += chunk.len();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn unsigned_bodies_are_refused_before_they_are_read_and_signed_ones_are_held_to_a_limit() {
    if !have_root("unsigned_bodies_are_refused_before_they_are_read") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let pid = c.ctrl.pid().unwrap();

    // A 290 MB body is announced and none of it sent: the answer comes at once.
    let t0 = Instant::now();
    let answer = post_streaming(
        &c.join,
        "POST /v1/agent/reports HTTP/1.1\r\nhost: x\r\ncontent-length: 290000000\r\n\r\n",
        0,
        Duration::from_secs(5),
    );
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer:?}");
    assert!(answer.contains("signature headers are missing"), "{answer}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());

    // Eight at once, each streaming 64 MiB: the controller does not hold them.
    let before = rss_kb(pid);
    let senders: Vec<_> = (0..8)
        .map(|_| {
            let addr = c.join.clone();
            std::thread::spawn(move || {
                post_streaming(
                    &addr,
                    "POST /v1/agent/reports HTTP/1.1\r\nhost: x\r\ncontent-length: 67108864\r\nx-labpool-timestamp: 1\r\nx-labpool-nonce: n\r\nx-labpool-signature: 00\r\nx-labpool-body-sha256: 0000000000000000000000000000000000000000000000000000000000000000\r\n\r\n",
                    64 << 20,
                    Duration::from_secs(10),
                )
            })
        })
        .collect();
    for s in senders {
        let answer = s.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer:?}");
    }
    let grown_mb = rss_kb(pid).saturating_sub(before) / 1024;
    assert!(grown_mb < 64, "the controller grew by {grown_mb} MB");

    // With the key, a heartbeat (which carries GPU readings) is held to its route's 1M.
    let key = labpool_cluster::ClusterKey::load(&c.ctrl.dir.join("cluster.key")).unwrap();
    let body = vec![b' '; 2 << 20];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let hash = labpool_cluster::body_sha256(&body);
    let sig = key.sign_head(
        &labpool_cluster::Head {
            method: "POST",
            path: "/v1/agent/heartbeat",
            body_sha256: &hash,
            uid: None,
        },
        now,
        "big-heartbeat",
    );
    let head = format!(
        "POST /v1/agent/heartbeat HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nx-labpool-timestamp: {}\r\nx-labpool-nonce: {}\r\nx-labpool-signature: {}\r\nx-labpool-body-sha256: {hash}\r\n\r\n",
        body.len(),
        sig.timestamp_ms,
        sig.nonce,
        sig.mac
    );
    let answer = post_streaming(&c.join, &head, body.len(), Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:?}");
    assert!(answer.contains("larger than 1M"), "{answer}");
}
