//! A pool of several nodes for end-to-end tests: a controller that runs no jobs itself
//! (`local_node = false`) taking agents on a TCP address, and real `labpool agent` processes,
//! each with its own name, state, cache and virtual GPUs, joined with `labpool init --join`.

use crate::pool::{Pool, bin, for_tests};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on `ip` (bound and released; the race with other tests is short).
pub fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One `labpool agent`.
pub struct Agent {
    /// Node name.
    pub name: String,
    /// Its directory (config, state, cache, socket).
    pub dir: PathBuf,
    /// Its config.
    pub config: PathBuf,
    child: Option<Child>,
    /// Run inside this network namespace, when set.
    pub netns: Option<String>,
    /// Extra environment for the agent process.
    pub env: Vec<(String, String)>,
    /// A command the agent is started under (`unshare …`), before the binary.
    pub wrapper: Vec<String>,
}

impl Agent {
    /// Starts the agent process (log in DIR/agent.out).
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("agent.out"))
            .unwrap();
        let mut argv: Vec<String> = match &self.netns {
            Some(ns) => ["ip", "netns", "exec", ns.as_str()]
                .map(String::from)
                .to_vec(),
            None => Vec::new(),
        };
        argv.extend(self.wrapper.iter().cloned());
        argv.push(bin().display().to_string());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd.arg("agent")
            .env("LABPOOL_CONFIG", &self.config)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.child = Some(cmd.spawn().unwrap());
    }

    /// What the agent printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.out")).unwrap_or_default()
    }

    /// The agent's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the agent with SIGKILL (its jobs' shims live on).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the agent to exit; its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let t0 = Instant::now();
        let c = self.child.as_mut().expect("started");
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                self.child = None;
                return s;
            }
            assert!(
                t0.elapsed() < timeout,
                "agent did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A controller and its agents.
pub struct Cluster {
    /// The controller (its CLI, config and log).
    pub ctrl: Pool,
    /// Where agents join.
    pub join: String,
    /// The agents.
    pub agents: Vec<Agent>,
}

impl Cluster {
    /// A controller listening on `ip` with a `node_timeout` of `timeout`; no agents yet.
    pub fn new(ip: &str, timeout: &str) -> Cluster {
        let ctrl = Pool::build(None, &[]);
        let join = format!("{ip}:{}", free_port(ip));
        ctrl.edit_config(|t| {
            t.replacen(
                "[controller]\n",
                &format!(
                    "[controller]\nlisten = \"{join}\"\nnode_timeout = \"{timeout}\"\nlocal_node = false\n"
                ),
                1,
            )
        });
        Cluster {
            ctrl,
            join,
            agents: Vec::new(),
        }
    }

    /// The controller's binary copied where other users can run it.
    pub fn for_users(mut self) -> Cluster {
        self.ctrl = self.ctrl.for_users();
        self
    }

    /// Writes an agent's config with `labpool init --join` (not started); returns its index.
    pub fn add_agent(&mut self, name: &str, gpus: &str, listen_ip: &str) -> usize {
        let dir = self.ctrl.dir.join(name);
        let out = Command::new(bin())
            .args(["init", "--dir"])
            .arg(&dir)
            .args(["--join", &self.join, "--key"])
            .arg(self.ctrl.dir.join("cluster.key"))
            .args(["--name", name, "--virtual-gpus", gpus])
            .args(["--listen", &format!("{listen_ip}:0")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "init --join failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let config = dir.join("labpool.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        let text = for_tests(&text).replace("heartbeat = \"10s\"", "heartbeat = \"250ms\"");
        std::fs::write(&config, text).unwrap();
        self.agents.push(Agent {
            name: name.to_string(),
            dir,
            config,
            child: None,
            netns: None,
            env: Vec::new(),
            wrapper: Vec::new(),
        });
        self.agents.len() - 1
    }

    /// Starts agent `i` and waits until the controller lists its node as up and answering
    /// (its first orders taken).
    pub fn start_agent(&mut self, i: usize) {
        self.agents[i].spawn();
        let name = self.agents[i].name.clone();
        self.wait_node(&name, Duration::from_secs(20), |n| {
            n["state"].as_str() != Some("DOWN") && !n["agent"].is_null() && n["responding"] != false
        });
    }

    /// `labpool nodes --json`.
    pub fn nodes(&self) -> Vec<Value> {
        serde_json::from_str(&self.ctrl.ok(&["nodes", "--json"])).unwrap()
    }

    /// Waits until `pred` holds for node `name`.
    pub fn wait_node(&self, name: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let t0 = Instant::now();
        loop {
            if let Some(n) = self.nodes().into_iter().find(|n| n["name"] == name)
                && pred(&n)
            {
                return n;
            }
            if t0.elapsed() > timeout {
                let logs: Vec<String> = self
                    .agents
                    .iter()
                    .map(|a| format!("--- {}:\n{}", a.name, a.log()))
                    .collect();
                panic!(
                    "node {name} did not reach the expected state: {:#?}\n{}\n{}",
                    self.nodes(),
                    self.ctrl.serve_log(),
                    logs.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every agent's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = self.ctrl.serve_log();
        for a in &self.agents {
            out.push_str(&format!("\n--- agent {}:\n{}", a.name, a.log()));
        }
        out
    }
}

/// POSTs `body` to `path` on `addr`, signed with `key` as a node agent (no uid). (status, body)
pub fn signed_post(
    key: &labpool_cluster::ClusterKey,
    addr: &str,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let nonce = format!("forged-{now}-{}", body.len());
    let sig = key.sign(
        &labpool_cluster::Request {
            method: "POST",
            path,
            body,
            uid: None,
        },
        now,
        &nonce,
    );
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-labpool-timestamp: {}\r\nx-labpool-nonce: {}\r\nx-labpool-signature: {}\r\nx-labpool-body-sha256: {}\r\n\r\n",
        body.len(),
        sig.timestamp_ms,
        sig.nonce,
        sig.mac,
        labpool_cluster::body_sha256(body)
    );
    http(addr, &head, body)
}

/// Sends one raw HTTP request (`head`, then `body`) to `addr` and reads the answer to its
/// end: (its status line and headers, its body). A listener a daemon binds just after it
/// answers on its socket is waited for, up to 5 s.
pub fn http_exchange(addr: &str, head: &str, body: &[u8]) -> (String, String) {
    let mut connected = None;
    crate::pool::wait_until(
        Duration::from_secs(5),
        || {
            connected = std::net::TcpStream::connect(addr).ok();
            connected.is_some()
        },
        || format!("nothing listens on {addr}"),
    );
    let mut s = connected.unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (head.to_string(), body.to_string())
}

/// Sends one raw HTTP request to `addr`: (status, body).
pub fn http(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let (head, body) = http_exchange(addr, head, body);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, body)
}

/// A registration of node `name` with no GPUs, as an agent of `version` sends it (for tests
/// that speak for an agent with the cluster key).
pub fn registration(name: &str, version: &str) -> labpool::api::agent::Registration {
    labpool::api::agent::Registration {
        node: labpool_scheduler::node::NodeSpec {
            name: name.into(),
            gpus: Vec::new(),
            cpus: 1,
            mem_mib: 1024,
            features: vec![],
        },
        gpu_source: "none".into(),
        isolation: Default::default(),
        port: free_port("127.0.0.1"),
        advertise: None,
        cache_dir: None,
        heartbeat_ms: None,
        checkpoint: None,
        instance: format!("{name}-{version}"),
        version: version.into(),
    }
}
