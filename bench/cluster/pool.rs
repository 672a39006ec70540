//! A pool under test: one controller, with its agents when it has some, driven over its API
//! socket: placing an array of jobs, adding a dataset and staging it onto node caches.

use crate::common::{scratch_dir, xorshift};
use crate::daemon::{Daemon, edit, free_port, init, init_agent, many_cpus};
use crate::report::{Report, stage_report};
use labpool::api::data::{AddDatasetRequest, CacheStatus, DatasetView, StageQueued, StageRequest};
use labpool::api::{SubmitRequest, Submitted};
use labpool::client::Client;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A controller, with its agents when it has some; everything in `dir`.
pub struct Pool {
    pub dir: tempfile::TempDir,
    client: Client,
    agents: Vec<Daemon>,
    pub names: Vec<String>,
    // Dropped last: agents stop before their controller.
    ctrl: Daemon,
}

impl Pool {
    /// `labpool init --virtual-gpus GPUS` and a plain `labpool serve`.
    pub fn one_box(rt: &tokio::runtime::Runtime, base: &Path, gpus: &str) -> Pool {
        let dir = scratch_dir(base, "cluster-box");
        let d = dir.path().to_str().unwrap().to_string();
        init(&["--dir", &d, "--virtual-gpus", gpus]);
        let config = dir.path().join("labpool.toml");
        edit(&config, |t| {
            many_cpus(t.replace("kill_grace = \"30s\"", "kill_grace = \"1s\""))
        });
        Pool::serve(rt, dir, config)
    }

    /// A controller that runs no jobs, and `nodes` agents of `gpus` each; with `bandwidth`,
    /// each agent reads the shared source at most that fast.
    pub fn cluster(
        rt: &tokio::runtime::Runtime,
        base: &Path,
        nodes: usize,
        gpus: &str,
        bandwidth: Option<&str>,
    ) -> Pool {
        let dir = scratch_dir(base, "cluster");
        let d = dir.path().to_path_buf();
        init(&["--dir", d.to_str().unwrap()]);
        let config = d.join("labpool.toml");
        let join = format!("127.0.0.1:{}", free_port());
        edit(&config, |t| {
            t.replacen(
                "[controller]\n",
                &format!(
                    "[controller]\nlisten = \"{join}\"\nnode_timeout = \"30s\"\nlocal_node = false\n"
                ),
                1,
            )
            .replace("kill_grace = \"30s\"", "kill_grace = \"1s\"")
        });
        let mut pool = Pool::serve(rt, dir, config);
        for i in 1..=nodes {
            let name = format!("node{i}");
            let node_dir = d.join(&name);
            let agent_config = init_agent(&d, &join, &name, gpus);
            edit(&agent_config, |t| {
                let t = many_cpus(
                    t.replace("heartbeat = \"10s\"", "heartbeat = \"250ms\"")
                        .replace("kill_grace = \"30s\"", "kill_grace = \"1s\""),
                );
                match bandwidth {
                    Some(bw) => {
                        t.replacen("[cache]\n", &format!("[cache]\nbandwidth = \"{bw}\"\n"), 1)
                    }
                    None => t,
                }
            });
            pool.agents.push(Daemon::start(
                "agent",
                &agent_config,
                node_dir.join("agent.out"),
            ));
            pool.names.push(name);
        }
        // Every agent registered and up.
        let t0 = Instant::now();
        loop {
            let nodes: Vec<Value> = rt
                .block_on(pool.client.get("/v1/nodes"))
                .unwrap_or_default();
            let up = nodes
                .iter()
                .filter(|n| !n["agent"].is_null() && n["state"] != "DOWN")
                .count();
            if up == pool.names.len() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{up} of {} agents up after 30 s:\n{}",
                pool.names.len(),
                pool.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        pool
    }

    /// Starts `labpool serve` on `config` and waits for it to answer.
    fn serve(rt: &tokio::runtime::Runtime, dir: tempfile::TempDir, config: PathBuf) -> Pool {
        let ctrl = Daemon::start("serve", &config, dir.path().join("serve.out"));
        let client = Client::new(&dir.path().join("labpool.sock"));
        let t0 = Instant::now();
        while rt
            .block_on(client.get::<labpool::api::Ping>("/v1/ping"))
            .is_err()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "labpool serve did not start:\n{}",
                ctrl.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        Pool {
            dir,
            client,
            agents: Vec::new(),
            names: Vec::new(),
            ctrl,
        }
    }

    /// The controller's and every agent's output, for failure messages.
    fn logs(&self) -> String {
        let mut out = format!("--- controller:\n{}", self.ctrl.text());
        for (name, a) in self.names.iter().zip(&self.agents) {
            out.push_str(&format!("\n--- agent {name}:\n{}", a.text()));
        }
        out
    }

    /// Warnings and errors the controller and the agents logged.
    pub fn complaints(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut scan = |who: &str, text: String| {
            for l in text.lines() {
                if l.contains(" WARN ") || l.contains(" ERROR ") {
                    out.push(format!("{who}: {l}"));
                }
            }
        };
        scan("controller", self.ctrl.text());
        for (name, a) in self.names.iter().zip(&self.agents) {
            scan(name, a.text());
        }
        out
    }

    fn array_request(&self, n: usize) -> SubmitRequest {
        SubmitRequest {
            output: Some("/dev/null".into()),
            environment: [("PATH".to_string(), "/usr/bin:/bin".to_string())].into(),
            array: Some(format!("0-{}", n - 1)),
            ..SubmitRequest::command("bench", "true", &self.dir.path().join("work"), 1)
        }
    }

    /// Submits one array of `n` tasks and waits for all to end. Returns seconds from just
    /// before the submit to the last task's start, and to the last task's end.
    pub fn place(&self, rt: &tokio::runtime::Runtime, n: usize) -> (f64, f64) {
        let req = self.array_request(n);
        let t0 = now_ms();
        let s: Submitted = rt.block_on(self.client.post("/v1/jobs", &req)).unwrap();
        assert_eq!(s.job_ids.len(), n);
        let started = Instant::now();
        loop {
            let active: Vec<Value> = rt.block_on(self.client.get("/v1/jobs")).unwrap();
            if active.is_empty() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "{} tasks still active after 600 s:\n{}",
                active.len(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        let done: Vec<Value> = rt
            .block_on(self.client.history(None, Some(t0), n + 100))
            .unwrap()
            .iter()
            .map(|j| serde_json::to_value(j).unwrap())
            .collect();
        assert_eq!(done.len(), n, "every task in the history");
        let bad: Vec<&Value> = done.iter().filter(|j| j["state"] != "COMPLETED").collect();
        assert!(bad.is_empty(), "tasks that did not complete: {bad:?}");
        let ms = |j: &Value, k: &str| {
            chrono::DateTime::parse_from_rfc3339(j[k].as_str().unwrap())
                .unwrap()
                .timestamp_millis()
        };
        let last_start = done.iter().map(|j| ms(j, "start_time")).max().unwrap();
        let last_end = done.iter().map(|j| ms(j, "end_time")).max().unwrap();
        ((last_start - t0) as f64 / 1e3, (last_end - t0) as f64 / 1e3)
    }

    /// Makes `mb` MB of random bytes in 48 files under the datasets root and registers them.
    pub fn add_dataset(
        &self,
        rt: &tokio::runtime::Runtime,
        name: &str,
        mb: f64,
        seed: u64,
    ) -> DatasetView {
        let root = self.dir.path().join("shared/datasets").join(name);
        std::fs::create_dir_all(&root).unwrap();
        let per_file = (mb * 1e6 / 48.0) as usize;
        let mut x = seed | 1;
        for i in 0..48 {
            let mut buf = Vec::with_capacity(per_file + 8);
            while buf.len() < per_file {
                buf.extend_from_slice(&xorshift(&mut x).to_le_bytes());
            }
            buf.truncate(per_file);
            std::fs::write(root.join(format!("part-{i:02}.bin")), buf).unwrap();
        }
        let req = AddDatasetRequest {
            name: name.into(),
            path: root,
            description: String::new(),
        };
        rt.block_on(self.client.post("/v1/datasets", &req)).unwrap()
    }

    /// Warms `name` on `node` (every node without one) and waits until its current version is
    /// complete on every node it was queued on. Seconds, and the nodes.
    pub fn stage(
        &self,
        rt: &tokio::runtime::Runtime,
        name: &str,
        node: Option<&str>,
    ) -> (f64, Vec<String>) {
        let t0 = Instant::now();
        let req = StageRequest {
            name: name.into(),
            node: node.map(str::to_string),
        };
        let q: StageQueued = rt
            .block_on(self.client.post("/v1/cache/stage", &req))
            .unwrap();
        let key = format!("{}@{}: ", q.name, q.version);
        loop {
            let caches: Vec<CacheStatus> = rt.block_on(self.client.get("/v1/cache")).unwrap();
            let mine: Vec<&CacheStatus> = caches
                .iter()
                .filter(|c| q.nodes.contains(&c.node))
                .collect();
            let complete = mine
                .iter()
                .filter(|c| {
                    c.versions
                        .iter()
                        .any(|v| v.complete && v.name == q.name && v.version == q.version)
                })
                .count();
            if complete == q.nodes.len() {
                return (t0.elapsed().as_secs_f64(), q.nodes);
            }
            let failed: Vec<&String> = mine
                .iter()
                .flat_map(|c| c.failed.iter())
                .filter(|f| f.starts_with(&key))
                .collect();
            assert!(
                failed.is_empty(),
                "staging {key} failed: {failed:?}\n{}",
                self.logs()
            );
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "staging {key} not complete after 300 s:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Each agent's report of its last stage, from its log.
    pub fn reports(&self) -> Vec<Report> {
        self.agents
            .iter()
            .map(|a| stage_report(&a.text()))
            .collect()
    }
}
