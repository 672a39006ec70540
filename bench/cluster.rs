//! Several nodes on one machine: how fast a controller places jobs on three `labpool agent`
//! processes against one `labpool serve` box with as many GPUs, and how long one dataset takes
//! to reach three node caches with and without staging from a peer, against `rsync -a`, in one
//! run, with medians and ratios.
//!
//! ```text
//! cargo bench --bench cluster                      # as root: agents run jobs as their owners
//! BENCH_RUNS=3 BENCH_JOBS=600 BENCH_DATASET_MB=96 BENCH_BW=16M cargo bench --bench cluster
//! BENCH_PARTS=place (or stage) cargo bench --bench cluster    # one part only
//! ```
//!
//! Placement: a controller with `local_node = false` and three agents of 4 virtual GPUs each
//! (joined over signed HTTP on loopback), against `labpool init --virtual-gpus 12:t4` and a
//! plain `labpool serve` (its agent in-process). Each gets one array of BENCH_JOBS one-GPU tasks
//! running `true`, submitted through the API on the Unix socket. Placements per second: the
//! tasks over the time from just before the submit to the last task's recorded start. Fresh
//! pools for every run.
//!
//! Staging: a dataset of BENCH_DATASET_MB MB in 48 files of random bytes under the controller's
//! datasets root, registered, then warmed (`POST /v1/cache/stage`, what `labpool cache stage`
//! sends) onto three agents whose `[cache] bandwidth` is BENCH_BW (bytes/s read from the shared
//! source, per node). Without peers: all three at once, none holding it. With peers: node1
//! first, then node2 and node3 at once; the controller names node1 as their peer and they pull
//! from it over HTTP (not held to the limit). Timed from the request to the version complete on
//! every node (polled every 20 ms). A fresh cluster for every way and run. Bytes from the
//! source and from the peer are each agent's own stage report, from the `staged` line it logs
//! (the controller keeps a warm-up's report nowhere).
//!
//! The peer tool: `rsync -a --bwlimit` (KiB/s equal to the limit) from the source into three
//! directories at once; and rsync chained the way peer staging works (one copy at the limit,
//! then two unlimited copies from it). rsync leaves its copies in the page cache, a staged
//! version is synced before it is complete: the "+ sync" column adds the flush.

use labpool::api::{SubmitRequest, Submitted};
use labpool::client::Client;
use labpool::data_api::{AddDatasetRequest, CacheStatus, DatasetView, StageQueued, StageRequest};
use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common.rs"]
mod common;
use common::{bench_base, env_num, median, rsync_transferred, run, scratch_dir, xorshift};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_labpool"))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A free TCP port on loopback (bound and released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `labpool init ARGS`; panics with what it printed when it fails.
fn init(args: &[&str]) {
    run(Command::new(bin()).arg("init").args(args));
}

/// Rewrites a config file.
fn edit(config: &Path, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(config).unwrap();
    std::fs::write(config, f(text)).unwrap();
}

/// Every `cpus = N` line set to 32: jobs ask for one core each, and this machine has 2.
fn many_cpus(text: String) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("cpus = ") {
                "cpus = 32"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// A labpool process (`serve` or `agent`), its output in `log`; stopped with TERM on drop.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(what: &str, config: &Path, log: PathBuf) -> Daemon {
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin())
            .arg(what)
            .env("LABPOOL_CONFIG", config)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Daemon { child, log }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One stage as its agent logged it (the `staged` line with the stage report's counts).
#[derive(Debug, Default, Clone)]
struct Report {
    bytes_copied: u64,
    bytes_from_peer: u64,
    files_from_peer: u64,
    /// The peer the controller named (`-`: none).
    peer: String,
    peer_fallback: Option<String>,
    /// `staged` lines found (one expected: each agent stages once per cluster).
    count: usize,
}

/// The value of ` KEY=VALUE` in a log line, quotes removed; the last field runs to the end.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[at..];
    let value = if key == "peer_fallback" {
        rest
    } else {
        rest.split(' ').next().unwrap_or("")
    };
    Some(value.trim().trim_matches('"'))
}

/// The last `staged` report in an agent's log.
fn stage_report(log: &str) -> Report {
    let mut out = Report::default();
    for line in log
        .lines()
        .filter(|l| l.contains(" staged ") && l.contains(" bytes_copied="))
    {
        let n = |k: &str| field(line, k).and_then(|v| v.parse().ok()).unwrap_or(0);
        out = Report {
            bytes_copied: n("bytes_copied"),
            bytes_from_peer: n("bytes_from_peer"),
            files_from_peer: n("files_from_peer"),
            peer: field(line, "peer").unwrap_or("-").to_string(),
            peer_fallback: field(line, "peer_fallback")
                .filter(|v| *v != "-")
                .map(str::to_string),
            count: out.count + 1,
        };
    }
    out
}

/// A controller, with its agents when it has some; everything in `dir`.
struct Pool {
    dir: tempfile::TempDir,
    client: Client,
    agents: Vec<Daemon>,
    names: Vec<String>,
    // Dropped last: agents stop before their controller.
    ctrl: Daemon,
}

impl Pool {
    /// `labpool init --virtual-gpus GPUS` and a plain `labpool serve`.
    fn one_box(rt: &tokio::runtime::Runtime, base: &Path, gpus: &str) -> Pool {
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
    fn cluster(
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
            init(&[
                "--dir",
                node_dir.to_str().unwrap(),
                "--join",
                &join,
                "--key",
                d.join("cluster.key").to_str().unwrap(),
                "--name",
                &name,
                "--virtual-gpus",
                gpus,
                "--listen",
                "127.0.0.1:0",
            ]);
            let agent_config = node_dir.join("labpool.toml");
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
    fn complaints(&self) -> Vec<String> {
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
            name: "bench".into(),
            script: "#!/bin/sh\ntrue\n".into(),
            args: Vec::new(),
            workdir: self.dir.path().join("work"),
            output: Some("/dev/null".into()),
            error: None,
            gpus: 1,
            gpu_type: None,
            cpus: 1,
            mem_mib: 0,
            time_limit: None,
            partition: None,
            environment: [("PATH".to_string(), "/usr/bin:/bin".to_string())].into(),
            umask: 0o022,
            account: None,
            emergency: false,
            datasets: Vec::new(),
            dependency: None,
            array: Some(format!("0-{}", n - 1)),
            env: None,
            env_id: None,
            env_kind: None,
            gpu_share: false,
            no_requeue: false,
        }
    }

    /// Submits one array of `n` tasks and waits for all to end. Returns seconds from just
    /// before the submit to the last task's start, and to the last task's end.
    fn place(&self, rt: &tokio::runtime::Runtime, n: usize) -> (f64, f64) {
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
            .block_on(
                self.client
                    .get(&format!("/v1/history?since_ms={t0}&limit={}", n + 100)),
            )
            .unwrap();
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
    fn add_dataset(
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
    fn stage(
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
    fn reports(&self) -> Vec<Report> {
        self.agents
            .iter()
            .map(|a| stage_report(&a.text()))
            .collect()
    }
}

/// `16M` → 16,000,000 (labpool's sizes are decimal).
fn parse_rate(s: &str) -> u64 {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1e3),
        Some('M' | 'm') => (&s[..s.len() - 1], 1e6),
        Some('G' | 'g') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    (num.parse::<f64>().expect("BENCH_BW: a rate such as 16M") * mult) as u64
}

/// `rsync -a --stats [--bwlimit=KIB] SRC/ DST/` into every destination at once. Seconds, bytes.
fn rsync_all(src: &Path, dsts: &[PathBuf], kib: Option<u64>) -> (f64, u64) {
    let t0 = Instant::now();
    let children: Vec<Child> = dsts
        .iter()
        .map(|d| {
            let mut c = Command::new("rsync");
            c.arg("-a").arg("--stats");
            if let Some(k) = kib {
                c.arg(format!("--bwlimit={k}"));
            }
            c.arg(format!("{}/", src.display()))
                .arg(d)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("rsync runs (apt-get install rsync)")
        })
        .collect();
    let mut bytes = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "rsync failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bytes += rsync_transferred(&String::from_utf8_lossy(&out.stdout));
    }
    (t0.elapsed().as_secs_f64(), bytes)
}

fn sync_time() -> f64 {
    let t0 = Instant::now();
    nix::unistd::sync();
    t0.elapsed().as_secs_f64()
}

fn placement(rt: &tokio::runtime::Runtime, base: &Path, runs: usize) {
    let n: usize = env_num("BENCH_JOBS", 600);
    println!("placement: one array of {n} one-GPU tasks (`true`), {runs} runs, fresh pools each");
    let (mut multi, mut boxed) = (Vec::new(), Vec::new());
    let (mut multi_end, mut box_end) = (Vec::new(), Vec::new());
    let mut complaints = Vec::new();
    for r in 0..runs {
        // Which goes first alternates from run to run.
        let mut order = [true, false];
        if r % 2 == 1 {
            order.reverse();
        }
        let (mut start, mut end, mut bstart, mut bend) = (0.0, 0.0, 0.0, 0.0);
        for agents in order {
            let pool = if agents {
                Pool::cluster(rt, base, 3, "4:t4", None)
            } else {
                Pool::one_box(rt, base, "12:t4")
            };
            let (s, e) = pool.place(rt, n);
            complaints.extend(pool.complaints());
            drop(pool);
            if agents {
                (start, end) = (s, e);
            } else {
                (bstart, bend) = (s, e);
            }
        }
        multi.push(n as f64 / start);
        multi_end.push(end);
        boxed.push(n as f64 / bstart);
        box_end.push(bend);
        println!(
            "  run {} ({} first): 3 agents: last start {start:.2} s ({:.0}/s), last end {end:.2} s; one box: last start {bstart:.2} s ({:.0}/s), last end {bend:.2} s",
            r + 1,
            if r % 2 == 0 { "3 agents" } else { "one box" },
            multi[r],
            boxed[r]
        );
    }
    let (m, b) = (median(multi), median(boxed));
    let (me, be) = (median(multi_end), median(box_end));
    println!();
    println!(
        "| {n} one-GPU tasks, one array (median of {runs}) | 3 agents x 4 GPUs | one box, 12 GPUs | 3 agents / one box |"
    );
    println!("|---|---|---|---|");
    println!(
        "| placements per second (submit to last start) | {m:.0}/s | {b:.0}/s | {:.2}x |",
        m / b
    );
    println!(
        "| submit to last task ended | {me:.2} s | {be:.2} s | {:.2}x |",
        be / me
    );
    println!("(Slurm is not run here: bench/slurm/start.sh makes one node of 2 GPUs)");
    print_complaints(&complaints);
}

fn print_complaints(complaints: &[String]) {
    if complaints.is_empty() {
        println!("no warnings or errors in the logs");
        return;
    }
    println!(
        "{} warnings or errors in the logs, for example:",
        complaints.len()
    );
    let mut seen = std::collections::BTreeSet::new();
    for c in complaints {
        // One line per kind: the text after the timestamp, without numbers that vary.
        let kind: String = c
            .split_once(" WARN ")
            .or_else(|| c.split_once(" ERROR "))
            .map_or(c.as_str(), |(_, rest)| rest)
            .chars()
            .filter(|ch| !ch.is_ascii_digit())
            .take(80)
            .collect();
        if seen.insert(kind) && seen.len() <= 8 {
            println!("  {c}");
        }
    }
}

fn staging(rt: &tokio::runtime::Runtime, base: &Path, runs: usize) {
    let mb: f64 = env_num("BENCH_DATASET_MB", 96.0);
    let bw_text = std::env::var("BENCH_BW").unwrap_or_else(|_| "16M".into());
    let bw = parse_rate(&bw_text);
    let kib = bw / 1024;
    let third = format!("{}", bw / 3);
    println!(
        "staging: {mb} MB in 48 files onto 3 nodes, each reading the source at {bw_text} ({bw} B/s; rsync --bwlimit={kib}), {runs} runs, fresh clusters each"
    );
    #[derive(Default)]
    struct Way {
        secs: Vec<f64>,
        source: Vec<f64>,
        peer: Vec<f64>,
        sync: Vec<f64>,
    }
    let (mut nopeer, mut peer, mut shared) = (Way::default(), Way::default(), Way::default());
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    let (mut rs, mut rs_chain, mut rs_shared) = (Way::default(), Way::default(), Way::default());
    let mut complaints = Vec::new();
    let mut fallbacks = Vec::new();
    let sum = |rs: &[Report], f: fn(&Report) -> u64| rs.iter().map(f).sum::<u64>() as f64;
    let check = |what: &str, reports: &[Report], nodes: usize| {
        let counts: Vec<usize> = reports.iter().map(|r| r.count).collect();
        if counts.iter().filter(|c| **c == 1).count() != nodes {
            println!("  note: {what}: stage reports seen per agent {counts:?}");
        }
    };
    for r in 0..runs {
        let seed = 0x5eed_0000 + r as u64;
        // Without peers: all three at once from the source.
        let pool = Pool::cluster(rt, base, 3, "4:t4", Some(&bw_text));
        pool.add_dataset(rt, "bench", mb, seed);
        let (t, nodes) = pool.stage(rt, "bench", None);
        assert_eq!(nodes.len(), 3, "queued on {nodes:?}");
        let reports = pool.reports();
        check("without peers", &reports, 3);
        nopeer.secs.push(t);
        nopeer.source.push(sum(&reports, |r| r.bytes_copied));
        nopeer.peer.push(sum(&reports, |r| r.bytes_from_peer));
        complaints.extend(pool.complaints());
        drop(pool);

        // With peers: node1 from the source, then node2 and node3 from node1.
        let pool = Pool::cluster(rt, base, 3, "4:t4", Some(&bw_text));
        pool.add_dataset(rt, "bench", mb, seed);
        let (t1, nodes1) = pool.stage(rt, "bench", Some("node1"));
        assert_eq!(nodes1, ["node1"]);
        let (t2, nodes2) = pool.stage(rt, "bench", None);
        assert_eq!(nodes2, ["node2", "node3"]);
        let reports = pool.reports();
        check("with peers", &reports, 3);
        for (name, rep) in pool.names.iter().zip(&reports) {
            if let Some(why) = &rep.peer_fallback {
                fallbacks.push(format!("run {}: {name}: {why}", r + 1));
            }
        }
        let peer_files: u64 = reports.iter().map(|r| r.files_from_peer).sum();
        let named: Vec<String> = pool
            .names
            .iter()
            .zip(&reports)
            .filter(|(_, r)| r.peer != "-")
            .map(|(n, r)| format!("{n} from {}", r.peer))
            .collect();
        peer.secs.push(t1 + t2);
        first.push(t1);
        rest.push(t2);
        peer.source.push(sum(&reports, |r| r.bytes_copied));
        peer.peer.push(sum(&reports, |r| r.bytes_from_peer));
        complaints.extend(pool.complaints());
        drop(pool);

        // Without peers, the source's bandwidth shared by the three (each node at a third).
        let pool = Pool::cluster(rt, base, 3, "4:t4", Some(&third));
        pool.add_dataset(rt, "bench", mb, seed);
        let (ts, _) = pool.stage(rt, "bench", None);
        let reports = pool.reports();
        shared.secs.push(ts);
        shared.source.push(sum(&reports, |r| r.bytes_copied));
        shared.peer.push(sum(&reports, |r| r.bytes_from_peer));
        complaints.extend(pool.complaints());

        // rsync, from the same source tree (the last cluster's), into fresh directories.
        let src = pool.dir.path().join("shared/datasets/bench");
        let out = scratch_dir(base, "cluster-rsync");
        let dsts: Vec<PathBuf> = (1..=3)
            .map(|i| out.path().join(format!("node{i}")))
            .collect();
        nix::unistd::sync();
        let (t, b) = rsync_all(&src, &dsts, Some(kib));
        rs.secs.push(t);
        rs.sync.push(t + sync_time());
        rs.source.push(b as f64);
        for d in &dsts {
            common::rm(d);
        }
        nix::unistd::sync();
        let (ta, ba) = rsync_all(&src, &dsts[..1], Some(kib));
        let (tb, _) = rsync_all(&dsts[0], &dsts[1..], None);
        rs_chain.secs.push(ta + tb);
        rs_chain.sync.push(ta + tb + sync_time());
        rs_chain.source.push(ba as f64);
        for d in &dsts {
            common::rm(d);
        }
        nix::unistd::sync();
        let (tc, bc) = rsync_all(&src, &dsts, Some(kib / 3));
        rs_shared.secs.push(tc);
        rs_shared.sync.push(tc + sync_time());
        rs_shared.source.push(bc as f64);
        drop(pool);
        println!(
            "  run {}: without peers {t:.2} s; with peers {:.2} s (node1 {t1:.2} s, then node2+node3 {t2:.2} s; {}, {peer_files} files from a peer); source shared {ts:.2} s; rsync x3 {:.2} s, chained {:.2} s, shared {:.2} s",
            r + 1,
            t1 + t2,
            named.join(" "),
            rs.secs[r],
            rs_chain.secs[r],
            rs_shared.secs[r]
        );
        println!(
            "    MB from the source: without peers {:.1}, with peers {:.1} (from the peer {:.1}), shared {:.1}; rsync {:.1}, chained {:.1}",
            nopeer.source[r] / 1e6,
            peer.source[r] / 1e6,
            peer.peer[r] / 1e6,
            shared.source[r] / 1e6,
            rs.source[r] / 1e6,
            rs_chain.source[r] / 1e6
        );
    }
    let m = |v: &[f64]| median(v.to_vec());
    println!();
    println!(
        "| {mb} MB onto 3 nodes, source at {bw_text} per node (median of {runs}) | labpool | labpool MB from source / from peer | rsync -a | rsync + sync | rsync MB from source | rsync / labpool |"
    );
    println!("|---|---|---|---|---|---|---|");
    let row = |what: &str, l: &Way, p: &Way| {
        let (lt, pt, ps) = (m(&l.secs), m(&p.secs), m(&p.sync));
        println!(
            "| {what} | {lt:.2} s | {:.1} / {:.1} | {pt:.2} s | {ps:.2} s | {:.1} | {:.2}x |",
            m(&l.source) / 1e6,
            m(&l.peer) / 1e6,
            m(&p.source) / 1e6,
            pt / lt
        );
    };
    row(
        "all three from the source at once (rsync: 3 in parallel)",
        &nopeer,
        &rs,
    );
    row(
        "node1 from the source, then node2 and node3 from it (rsync: chained)",
        &peer,
        &rs_chain,
    );
    row(
        &format!(
            "all three from the source, {} B/s each (a source of {bw_text} shared)",
            bw / 3
        ),
        &shared,
        &rs_shared,
    );
    println!(
        "with peers: node1 {:.2} s, then node2 and node3 {:.2} s (medians)",
        m(&first),
        m(&rest)
    );
    println!(
        "with peers / without: time {:.2}x, bytes from the source {:.2}x; against a shared source: time {:.2}x",
        m(&peer.secs) / m(&nopeer.secs),
        m(&peer.source) / m(&nopeer.source),
        m(&peer.secs) / m(&shared.secs)
    );
    if fallbacks.is_empty() {
        println!("no peer fallbacks reported");
    } else {
        println!("peer fallbacks reported:");
        for f in &fallbacks {
            println!("  {f}");
        }
    }
    print_complaints(&complaints);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs: usize = env_num("BENCH_RUNS", 3);
    let parts = std::env::var("BENCH_PARTS").unwrap_or_else(|_| "place,stage".into());
    let base = bench_base();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "labpool {} cluster benchmark, {} cores",
        env!("CARGO_PKG_VERSION"),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let t0 = Instant::now();
    if parts.contains("place") {
        placement(&rt, &base, runs);
        println!();
    }
    if parts.contains("stage") {
        staging(&rt, &base, runs);
    }
    println!("({:.0} s in all)", t0.elapsed().as_secs_f64());
}
