//! The simulator against the daemon: one small trace replayed through `labpool sim --policy
//! labpool` and through a real `labpool serve` with two agents of virtual GPUs, real dataset
//! copies and a clock that runs 60 times as fast. Both must place every job on the same node,
//! and copy and evict as often.
//!
//! The trace is made so that no two of its events (arrivals and ends) fall within a minute of
//! each other in the simulator: a real pool starts each job a fraction of a second late, and a
//! tie broken the other way would be noise, not a difference between the two.

use crate::nodes::Cluster;
use crate::pool::{have_root, log_number};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How much faster than the wall clock the pool runs.
const SCALE: f64 = 60.0;

/// Nine jobs of one user on 2 nodes of 2 GPUs, three 4 MB datasets, caches of 10 MB (two
/// datasets each): jobs queue, the locality scorer chooses between nodes, caches evict.
const TRACE: &str = "job_id,submit_s,user,gpus,dataset,job_type,dur_v100_s,dur_p100_s,dur_k80_s
1,180,root,1,a,train,1320,,
2,360,root,1,b,train,1440,,
3,540,root,1,a,eval,540,,
4,900,root,1,c,train,1200,,
5,1020,root,2,b,train,360,,
6,1140,root,1,c,eval,1080,,
7,1380,root,1,a,train,1140,,
8,2040,root,1,b,eval,300,,
9,2160,root,2,c,train,300,,
";

const DATASET_BYTES: usize = 4_000_000;

/// The simulator's cluster, as `labpool sim` takes it; the pool below is built to match.
const SIM_CLUSTER: [&str; 10] = [
    "--nodes",
    "2x2:v100",
    "--ssd",
    "10000000",
    "--shared-bw",
    "1M",
    "--ssd-bw",
    "100M",
    "--nic-bw",
    "10M",
];

/// One job as a side saw it.
#[derive(Debug, Clone, PartialEq)]
struct Ran {
    node: String,
    start_s: f64,
    end_s: f64,
}

/// `labpool sim --placements --json` on the trace: each trace job's run and time limit, and
/// (copies completed, evictions).
fn simulated(c: &Cluster) -> (BTreeMap<u64, (Ran, u64)>, (u64, u64)) {
    let dir = &c.ctrl.dir;
    std::fs::write(dir.join("trace.csv"), TRACE).unwrap();
    std::fs::write(
        dir.join("datasets.csv"),
        format!("dataset,bytes\na,{DATASET_BYTES}\nb,{DATASET_BYTES}\nc,{DATASET_BYTES}\n"),
    )
    .unwrap();
    let mut args = vec!["sim", "--trace", "trace.csv", "--datasets", "datasets.csv"];
    args.extend(SIM_CLUSTER);
    args.extend(["--policy", "labpool", "--placements", "--json"]);
    let mut cmd = c.ctrl.command(&args);
    let out = cmd.current_dir(dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut jobs = BTreeMap::new();
    let mut counts = (0, 0);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(job) = v["job"].as_u64() {
            let ran = Ran {
                node: v["node"].as_str().unwrap().to_string(),
                start_s: v["placed_s"].as_f64().unwrap(),
                end_s: v["end_s"].as_f64().unwrap(),
            };
            jobs.insert(job, (ran, v["limit_s"].as_u64().unwrap()));
        } else {
            assert_eq!(v["unfinished"], 0, "{v}");
            counts = (
                v["copies_completed"].as_u64().unwrap(),
                v["evictions"].as_u64().unwrap(),
            );
        }
    }
    (jobs, counts)
}

/// An agent's copies into its cache that completed (a stage of a version already there moves
/// no bytes and is none), and its evictions, with the lines that say so.
fn cache_work(log: &str) -> (u64, u64, Vec<&str>) {
    let copies: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" staged "))
        .filter(|l| {
            let moved = |key| log_number(l, key).unwrap_or(0);
            moved("bytes_copied") + moved("bytes_from_peer") > 0
        })
        .collect();
    let evictions: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("removing a cached version to make room"))
        .collect();
    let (c, e) = (copies.len() as u64, evictions.len() as u64);
    (c, e, copies.into_iter().chain(evictions).collect())
}

/// Seconds from the trace's start (the scaled clock's origin) to an RFC 3339 moment.
fn trace_s(moment: &Value, origin_ms: i64) -> f64 {
    let ms = labpool::clock::parse_ms(moment.as_str().unwrap_or_default()).unwrap_or(origin_ms);
    (ms - origin_ms) as f64 / 1000.0
}

/// Both sides, a row per job, for a failure's message.
fn side_by_side(sim: &BTreeMap<u64, (Ran, u64)>, real: &BTreeMap<u64, Ran>) -> String {
    let mut out = String::from("job  sim: node start end  |  serve: node start end\n");
    for (job, (s, _)) in sim {
        let r = &real[job];
        out.push_str(&format!(
            "{job:>3}  {} {:>7.1} {:>7.1}  |  {} {:>7.1} {:>7.1}\n",
            s.node, s.start_s, s.end_s, r.node, r.start_s, r.end_s
        ));
    }
    out
}

#[test]
fn a_trace_places_copies_and_evicts_alike_in_the_simulator_and_a_real_pool() {
    if !have_root("a_trace_places_copies_and_evicts_alike") {
        return;
    }
    // The scaled clock starts a moment from now, so that every process reads the same time.
    let origin_ms = labpool::clock::now_ms() + 3_000;
    let scale = (
        labpool::env_vars::LABPOOL_TEST_CLOCK_SCALE.to_string(),
        format!("{SCALE}@{origin_ms}"),
    );
    let mut c = Cluster::new("127.0.0.1", "1h");
    c.ctrl.env.push(scale.clone());
    let (sim, sim_counts) = simulated(&c);

    // Two nodes named as the simulator names them, caches of 10 MB swept only to make room
    // (the simulator does not model the high-watermark sweep).
    for name in ["v100-0-00", "v100-0-01"] {
        let i = c.add_agent(name, "2:v100", "127.0.0.1");
        let agent = &mut c.agents[i];
        agent.env.push(scale.clone());
        let text = std::fs::read_to_string(&agent.config).unwrap().replace(
            "[cache]\n",
            "[cache]\ncapacity = \"10000000\"\nhigh_watermark = 1.0\nlow_watermark = 1.0\n",
        );
        std::fs::write(&agent.config, text).unwrap();
    }
    c.ctrl.start();
    for i in 0..2 {
        c.start_agent(i);
    }
    let root = c.ctrl.dir.join("shared/datasets");
    for (k, name) in ["a", "b", "c"].into_iter().enumerate() {
        let src = root.join(name);
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("data.bin"),
            crate::pool::bytes(k as u64 + 1, DATASET_BYTES),
        )
        .unwrap();
        c.ctrl.ok(&["dataset", "add", name, src.to_str().unwrap()]);
    }

    // Each job at its arrival on the scaled clock, sleeping its run time in real seconds.
    let real_origin = Instant::now()
        + Duration::from_millis((origin_ms - labpool::clock::now_ms()).max(0) as u64);
    let mut ids = BTreeMap::new();
    let trace = TRACE
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>());
    for f in trace {
        let (job, submit_s, gpus, dataset, dur_s): (u64, f64, &str, &str, f64) = (
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f[3],
            f[4],
            f[6].parse().unwrap(),
        );
        let at = real_origin + Duration::from_secs_f64(submit_s / SCALE);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let limit = format!("{}", sim[&job].1 / 60);
        let script = format!("sleep {:.3}", dur_s / SCALE);
        let id = c.ctrl.submit(&[
            "--gpus",
            gpus,
            "--dataset",
            dataset,
            "-t",
            &limit,
            "--wrap",
            &script,
        ]);
        ids.insert(job, id);
    }
    let mut real = BTreeMap::new();
    for (job, id) in &ids {
        let v = c.ctrl.wait_done(*id, Duration::from_secs(120));
        assert_eq!(v["state"], "COMPLETED", "job {job}: {v}\n{}", c.logs());
        real.insert(
            *job,
            Ran {
                node: v["node"].as_str().unwrap_or_default().to_string(),
                start_s: trace_s(&v["start_time"], origin_ms),
                end_s: trace_s(&v["end_time"], origin_ms),
            },
        );
    }
    let logs: Vec<String> = c.agents.iter().map(|a| a.log()).collect();
    let (mut copies, mut evictions, mut lines) = (0, 0, Vec::new());
    for (agent, log) in c.agents.iter().zip(&logs) {
        let (c, e, l) = cache_work(log);
        copies += c;
        evictions += e;
        lines.extend(l.into_iter().map(|l| format!("{}: {l}", agent.name)));
    }
    let table = side_by_side(&sim, &real);
    for (job, (s, _)) in &sim {
        assert_eq!(
            s.node,
            real[job].node,
            "job {job} ran on another node:\n{table}\n{}",
            c.logs()
        );
    }
    assert_eq!(
        (copies, evictions),
        sim_counts,
        "(copies completed, evictions) differ, serve against sim:\n{table}\n{}",
        lines.join("\n")
    );
    eprintln!("{table}");
}
