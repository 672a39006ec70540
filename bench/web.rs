//! The web dashboard under a full pool: a controller with 16 agents of 8 virtual GPUs (128 GPUs)
//! and 1000 jobs (128 running, the rest waiting), and every page's server time (p50, p95) and
//! first-load size (HTML + CSS + script), side by side with the CLI command that shows the same
//! thing (`labpool nodes`, `labpool queue`), in one run, with ratios. The aims: p95 at most
//! 100 ms, first load at most 150 KB. Run as root (agents run jobs as their owners).
//!
//! ```text
//! cargo bench --bench web
//! BENCH_JOBS=1000 BENCH_NODES=16 BENCH_REPS=30 cargo bench --bench web
//! ```

#[path = "common.rs"]
mod common;
// The cluster bench's pool (controller and agents), of which this bench uses a part.
#[path = "cluster/daemon.rs"]
#[allow(dead_code)]
mod daemon;
#[path = "cluster/pool.rs"]
#[allow(dead_code)]
mod pool;
#[path = "cluster/report.rs"]
#[allow(dead_code)]
mod report;
use common::{env_num, median, percentile};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// One GET with the session cookie; returns the status, body length and head.
fn get(addr: &str, path: &str, cookie: &str) -> (u16, usize, String) {
    let headers = format!("Cookie: {cookie}\r\nAccept-Language: en\r\n");
    let (status, head, body) = common::http_get(addr, path, &headers);
    (status, body.len(), head)
}

fn main() {
    let jobs: usize = env_num("BENCH_JOBS", 1000);
    let nodes: usize = env_num("BENCH_NODES", 16);
    let gpus = nodes * 8;
    let reps: usize = env_num("BENCH_REPS", 30);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_labpool"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let base = common::bench_base();
    let cluster = pool::Pool::cluster(&rt, &base, nodes, "8:a100", None);
    let dir = &cluster.dir;
    let config = dir.path().join("labpool.toml");
    let cli = |args: &[&str]| {
        Command::new(&bin)
            .args(args)
            .env("LABPOOL_CONFIG", &config)
            .current_dir(dir.path().join("work"))
            .output()
            .unwrap()
    };
    let array = format!("--array=0-{}", jobs - 1);
    let out = cli(&[
        "submit",
        &array,
        "--gres=gpu:1",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 3600",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t0 = Instant::now();
    loop {
        let q: serde_json::Value =
            serde_json::from_slice(&cli(&["queue", "--json"]).stdout).unwrap_or_default();
        let running = q
            .as_array()
            .map_or(0, |a| a.iter().filter(|j| j["state"] == "RUNNING").count());
        if running >= gpus.min(jobs) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "only {running} jobs started"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let addr = std::fs::read_to_string(dir.path().join("state/web.addr"))
        .unwrap()
        .trim()
        .to_string();
    let login: serde_json::Value = serde_json::from_slice(&cli(&["web", "--json"]).stdout).unwrap();
    let url = login["url"].as_str().unwrap();
    let (status, _, head) = get(&addr, &url[url.find("/login").unwrap()..], "");
    assert_eq!(status, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    let assets: usize = ["/static/style.css", "/static/refresh.js"]
        .iter()
        .map(|p| get(&addr, p, &cookie).1)
        .sum();

    let time_cli = |args: &[&str]| {
        median(
            (0..10)
                .map(|_| {
                    let t = Instant::now();
                    assert!(cli(args).status.success());
                    t.elapsed().as_secs_f64() * 1000.0
                })
                .collect(),
        )
    };
    let peers = [
        ("/", Some(("labpool nodes", time_cli(&["nodes"])))),
        ("/queue", Some(("labpool queue", time_cli(&["queue"])))),
        ("/jobs", None),
        ("/jobs/1", None),
        ("/me", None),
        ("/data", None),
        ("/snapshots", None),
        ("/alerts", None),
    ];
    println!("web dashboard: {jobs} jobs, {gpus} GPUs, {reps} GETs per page (server time, ms)");
    println!(
        "{:<11} {:>7} {:>7} {:>9} {:>11}   CLI peer (median ms, page p50 / CLI)",
        "page", "p50", "p95", "HTML KB", "1st load KB"
    );
    for (page, peer) in peers {
        let mut times = Vec::new();
        let mut size = 0;
        for i in 0..reps + 2 {
            let t = Instant::now();
            let (status, len, head) = get(&addr, page, &cookie);
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            assert_eq!(status, 200, "{page}: {head}");
            size = len;
            if i >= 2 {
                times.push(ms);
            }
        }
        let p50 = median(times.clone());
        let p95 = percentile(times, 0.95);
        let peer = peer.map_or(String::new(), |(name, ms)| {
            format!("{name} {ms:.1} ms, {:.2}x", p50 / ms)
        });
        println!(
            "{page:<11} {p50:>7.1} {p95:>7.1} {:>9.1} {:>11.1}   {peer}",
            size as f64 / 1024.0,
            (size + assets) as f64 / 1024.0
        );
    }
    let _ = cli(&["cancel", "1"]);
    drop(cluster);
}
