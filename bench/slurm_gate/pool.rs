//! labpool over the test Slurm (`[executor] kind = "slurm"`), as `tests/e2e/slurm_gate.rs`
//! sets it up: a controller that runs no jobs itself, and one agent (cache only) per Slurm node
//! gn1..gn3 with 8 virtual A100s each. Driven through its CLI, as a member would.

use crate::daemon::{Daemon, edit, free_port, init, init_agent, many_cpus};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The Slurm nodes that get an agent.
pub const NODES: [&str; 3] = ["gn1", "gn2", "gn3"];

/// A controller over Slurm and its agents; stopped (TERM) when dropped, agents first.
pub struct Gate {
    config: PathBuf,
    /// Where jobs are submitted from (world-writable).
    pub work: PathBuf,
    /// The pool's id in its Slurm jobs' comments (`;pool=ID`).
    pub pool: String,
    agents: Vec<(String, Daemon)>,
    ctrl: Daemon,
}

/// Makes a config's ports and sizes fit a benchmark on this host: a 1 s kill grace, 32 cores,
/// metrics on a port of its own.
fn quick(t: String) -> String {
    many_cpus(
        t.replace("kill_grace = \"30s\"", "kill_grace = \"1s\"")
            .replace("listen = \"127.0.0.1:9400\"", "listen = \"127.0.0.1:0\"")
            .replace("listen = \"127.0.0.1:9401\"", "listen = \"127.0.0.1:0\"")
            .replace("listen = \"127.0.0.1:9402\"", "listen = \"127.0.0.1:0\""),
    )
}

impl Gate {
    /// `labpool init` in `dir` with `shared` as the shared root, `[executor] kind = "slurm"` on
    /// `slurm_conf` polled every `poll`, then the controller and the three agents started and
    /// registered.
    pub fn start(dir: &Path, shared: &Path, slurm_conf: &str, poll: &str) -> Gate {
        let d = dir.to_str().unwrap();
        init(&[
            "--dir",
            d,
            "--shared-root",
            shared.to_str().unwrap(),
            "--home-root",
            dir.join("home").to_str().unwrap(),
        ]);
        let config = dir.join("labpool.toml");
        let join = format!("127.0.0.1:{}", free_port());
        edit(&config, |t| {
            let t = quick(t).replacen(
                "[controller]\n",
                &format!(
                    "[controller]\nlisten = \"{join}\"\nnode_timeout = \"30s\"\nlocal_node = false\n"
                ),
                1,
            );
            format!(
                "{t}\n[executor]\nkind = \"slurm\"\nslurm_conf = \"{slurm_conf}\"\npoll = \"{poll}\"\n"
            )
        });
        let loaded = labpool::settings::Config::load(&config).unwrap();
        let pool = labpool::slurm_gate::pool_id(&loaded);
        let work = dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let ctrl = Daemon::start("serve", &config, dir.join("serve.out"));
        let mut gate = Gate {
            config,
            work,
            pool,
            agents: Vec::new(),
            ctrl,
        };
        gate.wait("the controller to answer", Duration::from_secs(30), |g| {
            g.cli(&["queue"]).status.success().then_some(())
        });
        for name in NODES {
            let node_dir = dir.join(name);
            let agent_config = init_agent(dir, &join, name, "8:a100");
            edit(&agent_config, |t| {
                quick(t).replace("heartbeat = \"10s\"", "heartbeat = \"250ms\"")
            });
            let agent = Daemon::start("agent", &agent_config, node_dir.join("agent.out"));
            gate.agents.push((name.to_string(), agent));
        }
        gate.wait("the agents to register", Duration::from_secs(30), |g| {
            let nodes: Vec<Value> = serde_json::from_str(&g.ok(&["nodes", "--json"])).ok()?;
            let up = nodes
                .iter()
                .filter(|n| !n["agent"].is_null() && n["state"] != "DOWN")
                .count();
            (up == NODES.len()).then_some(())
        });
        gate
    }

    /// Waits (polling every 100 ms) until `f` gives a value.
    pub fn wait<T>(&self, what: &str, timeout: Duration, f: impl Fn(&Gate) -> Option<T>) -> T {
        let t0 = Instant::now();
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                t0.elapsed() < timeout,
                "timed out waiting for {what}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The CLI, run from the work directory.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_labpool"))
            .args(args)
            .env("LABPOOL_CONFIG", &self.config)
            .current_dir(&self.work)
            .output()
            .unwrap()
    }

    /// The CLI's standard output; panics with its error when it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "labpool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `labpool dataset add NAME DIR`.
    pub fn add_dataset(&self, name: &str, dir: &Path) {
        self.ok(&["dataset", "add", name, dir.to_str().unwrap()]);
    }

    /// `labpool submit --parsable SCRIPT ARGS`; the job's id.
    pub fn submit(&self, script: &Path, args: &[&str]) -> u64 {
        let mut all = vec!["submit", "--parsable", script.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("submit said {out:?}"))
    }

    /// `labpool show ID --json`.
    pub fn show(&self, id: u64) -> Value {
        serde_json::from_str(&self.ok(&["show", &id.to_string(), "--json"])).unwrap()
    }

    /// How many jobs are still pending, staging or running.
    pub fn active(&self) -> usize {
        let q: Value = serde_json::from_str(&self.ok(&["queue", "--json"])).unwrap();
        q.as_array().map_or(0, Vec::len)
    }

    /// Bytes every agent read from the shared source and pulled from peers, the stages that
    /// copied something and all stages (a job's stage of data already complete copies
    /// nothing), summed over the `staged` lines the agents logged.
    pub fn staged(&self) -> (u64, u64, usize, usize) {
        let (mut source, mut peer, mut copies, mut stages) = (0, 0, 0, 0);
        for (_, a) in &self.agents {
            for line in a.text().lines().filter(|l| l.contains(" staged ")) {
                let n = |key: &str| -> u64 {
                    line.split_whitespace()
                        .find_map(|f| f.strip_prefix(key))
                        .and_then(|v| v.trim_matches('"').parse().ok())
                        .unwrap_or(0)
                };
                let (s, p) = (n("bytes_copied="), n("bytes_from_peer="));
                source += s;
                peer += p;
                copies += usize::from(s + p > 0);
                stages += 1;
            }
        }
        (source, peer, copies, stages)
    }

    /// When the gate submitted each job's (last) attempt to Slurm, held, by job: the time of
    /// its `submitted to Slurm, held` log line, ms since the epoch.
    pub fn held_times(&self) -> BTreeMap<u64, i64> {
        let mut out = BTreeMap::new();
        for line in self.ctrl.text().lines() {
            if !line.contains("submitted to Slurm, held") {
                continue;
            }
            let time = line.split_whitespace().next().unwrap_or_default();
            let job = line
                .split_whitespace()
                .find_map(|f| f.strip_prefix("job="))
                .and_then(|j| j.parse().ok());
            if let (Ok(t), Some(job)) = (chrono::DateTime::parse_from_rfc3339(time), job) {
                out.insert(job, t.timestamp_millis());
            }
        }
        out
    }

    /// Warnings and errors the controller and the agents logged.
    pub fn complaints(&self) -> Vec<String> {
        let mut out = Vec::new();
        let all = std::iter::once(("controller", &self.ctrl))
            .chain(self.agents.iter().map(|(n, a)| (n.as_str(), a)));
        for (who, d) in all {
            for l in d.text().lines() {
                if l.contains(" WARN ") || l.contains(" ERROR ") {
                    out.push(format!("{who}: {l}"));
                }
            }
        }
        out
    }

    /// The controller's log and the agents', for failure messages.
    pub fn logs(&self) -> String {
        let mut out = format!("--- controller:\n{}", self.ctrl.text());
        for (name, a) in &self.agents {
            out.push_str(&format!("\n--- agent {name}:\n{}", a.text()));
        }
        out
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // Agents first, then the controller (dropped after this body).
        self.agents.clear();
    }
}
