//! Peer-to-peer staging between real agents: a node pulls a dataset version from the node that
//! already holds it, a changed file travels as an rsync delta, and every file is checked.

use crate::nodes::Cluster;
use crate::pool::{bytes, have_root, log_number};

/// A number after `key=` in the last "staged" log line of `log` for `version`.
fn staged_field(log: &str, version: &str, key: &str) -> u64 {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains(" staged") && l.contains(version))
        .unwrap_or_else(|| panic!("no staged line for {version}:\n{log}"));
    log_number(line, key).unwrap_or_else(|| panic!("{key} missing: {line}"))
}

fn current_version(c: &Cluster, name: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&c.ctrl.ok(&["dataset", "show", name, "--json"])).unwrap();
    v["current"].as_str().unwrap().to_string()
}

/// Node 2 stages a version node 1 holds while the shared source is away: every file comes
/// from node 1 and is identical. After a 64 KiB edit in a 4 MiB file, node 2 (holding the old
/// version) gets the new one with about the changed bytes over the wire.
#[test]
fn a_node_stages_from_a_peer_and_a_changed_file_travels_as_a_delta() {
    if !have_root("a_node_stages_from_a_peer") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    for name in ["n1", "n2"] {
        let i = c.add_agent(name, "1:t4", "127.0.0.1");
        c.start_agent(i);
    }
    let root = c.ctrl.dir.join("shared/datasets");
    let src = root.join("imgs");
    std::fs::create_dir_all(src.join("train")).unwrap();
    for k in 0..20u64 {
        std::fs::write(src.join(format!("train/{k:03}.jpg")), bytes(k + 1, 50_000)).unwrap();
    }
    let big = bytes(99, 4 << 20);
    std::fs::write(src.join("big.bin"), &big).unwrap();
    c.ctrl
        .ok(&["dataset", "add", "imgs", src.to_str().unwrap()]);
    let v1 = current_version(&c, "imgs");
    c.ctrl.ok(&["cache", "stage", "imgs", "--node", "n1"]);

    // The shared source is gone for a moment: n2 can only get it from n1.
    let away = root.join("imgs.away");
    std::fs::rename(&src, &away).unwrap();
    c.ctrl.ok(&["cache", "stage", "imgs", "--node", "n2"]);
    std::fs::rename(&away, &src).unwrap();
    let n2 = c.agents[1].dir.join("cache/imgs").join(&v1);
    assert_eq!(std::fs::read(n2.join("big.bin")).unwrap(), big);
    for k in 0..20u64 {
        assert_eq!(
            std::fs::read(n2.join(format!("train/{k:03}.jpg"))).unwrap(),
            bytes(k + 1, 50_000)
        );
    }
    let log = c.agents[1].log();
    assert_eq!(staged_field(&log, &v1, "files_from_peer"), 21, "{log}");
    assert_eq!(staged_field(&log, &v1, "bytes_copied"), 0, "{log}");

    // 64 KiB changed in the middle of the big file: a new version.
    let mut edited = big.clone();
    edited[2 << 20..(2 << 20) + 65536].copy_from_slice(&bytes(7, 65536));
    std::fs::write(src.join("big.bin"), &edited).unwrap();
    c.ctrl.ok(&["dataset", "rescan", "imgs"]);
    let v2 = current_version(&c, "imgs");
    assert_ne!(v1, v2);
    c.ctrl.ok(&["cache", "stage", "imgs", "--node", "n1"]);
    c.ctrl.ok(&["cache", "stage", "imgs", "--node", "n2"]);
    let log = c.agents[1].log();
    assert_eq!(staged_field(&log, &v2, "files_delta"), 1, "{log}");
    let down = staged_field(&log, &v2, "bytes_from_peer");
    assert!(
        down <= 65536 * 11 / 10 + 8192,
        "{down} bytes came from the peer for 65536 changed\n{log}"
    );
    let n2 = c.agents[1].dir.join("cache/imgs").join(&v2);
    assert_eq!(std::fs::read(n2.join("big.bin")).unwrap(), edited);
}
