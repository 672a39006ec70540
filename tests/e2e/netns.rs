//! A network namespace joined to the host by a veth pair: a second "machine" for tests
//! across nodes, whose link a test can cut.

use crate::nodes::Cluster;
use std::process::Command;

/// A network namespace joined to the host by a veth pair, removed when dropped.
pub struct Netns {
    /// The namespace's name.
    pub name: String,
    host_if: String,
    /// The host's end of the pair.
    pub host_ip: String,
    /// The namespace's end.
    pub ns_ip: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// A fresh namespace and pair, named after this process.
    pub fn new() -> Netns {
        let id = std::process::id() % 100_000;
        let net = std::process::id() % 200 + 20;
        let n = Netns {
            name: format!("lpt{id}"),
            host_if: format!("lpa{id}"),
            host_ip: format!("10.213.{net}.1"),
            ns_ip: format!("10.213.{net}.2"),
        };
        let ns_if = format!("lpb{id}");
        let _ = Command::new("ip").args(["netns", "del", &n.name]).output();
        ip(&["netns", "add", &n.name]);
        ip(&[
            "link", "add", &n.host_if, "type", "veth", "peer", "name", &ns_if,
        ]);
        ip(&["link", "set", &ns_if, "netns", &n.name]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", n.host_ip),
            "dev",
            &n.host_if,
        ]);
        ip(&["link", "set", &n.host_if, "up"]);
        let ns_addr = format!("{}/24", n.ns_ip);
        for args in [
            ["addr", "add", ns_addr.as_str(), "dev", ns_if.as_str()].as_slice(),
            &["link", "set", ns_if.as_str(), "up"],
            &["link", "set", "lo", "up"],
        ] {
            let mut all = vec!["netns", "exec", n.name.as_str(), "ip"];
            all.extend_from_slice(args);
            ip(&all);
        }
        n
    }

    /// Takes the link down.
    pub fn cut(&self) {
        ip(&["link", "set", &self.host_if, "down"]);
    }

    /// Brings the link back.
    pub fn restore(&self) {
        ip(&["link", "set", &self.host_if, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

/// A fresh namespace and a controller (started) on its host side with `node_timeout`; then
/// an agent `name` with `gpus` in the namespace, not started yet (`Cluster::start_agent`).
pub fn cluster_with_agent_inside(timeout: &str, name: &str, gpus: &str) -> (Netns, Cluster, usize) {
    let ns = Netns::new();
    let mut c = Cluster::new(&ns.host_ip, timeout);
    c.ctrl.start();
    let a = c.add_agent(name, gpus, &ns.ns_ip);
    c.agents[a].netns = Some(ns.name.clone());
    (ns, c, a)
}
