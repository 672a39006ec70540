//! Notebooks through the dashboard: how soon `labpool notebook` has JupyterLab answering on a
//! free GPU, how long its page takes through the dashboard, and what the dashboard's proxy adds
//! to each request, against the same request sent straight to JupyterLab's port, in one run.
//! The aims: usable within 10 s; the proxy adds under 2 ms per request on loopback.
//!
//! ```text
//! cargo bench --bench notebook                  # BENCH_REPS=200
//! ```
//!
//! It needs JupyterLab in a venv (`LABPOOL_JUPYTER`, by default /var/tmp/labpool-jupyter, as
//! `scripts/test` makes it). Two ways: each request on a fresh TCP connection to its server (as
//! a browser's first request does; the proxy reuses its own kept connection to JupyterLab), and
//! all on one kept-alive connection each (a page's later requests: what the proxy itself adds).

#[path = "common.rs"]
mod common;
use common::{env_num, median, percentile};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// One GET with `headers`; returns the status and the head.
fn get(addr: &str, path: &str, headers: &str) -> (u16, String) {
    let (status, head, _) = common::http_get(addr, path, headers);
    (status, head)
}

/// `n` GETs on one kept-alive connection; each one's time, ms.
fn kept_alive(addr: &str, path: &str, headers: &str, n: usize) -> Vec<f64> {
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_nodelay(true).unwrap();
    let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\r\n");
    (0..n)
        .map(|_| {
            let t = Instant::now();
            conn.write_all(req.as_bytes()).unwrap();
            let mut length = 0;
            loop {
                let mut line = String::new();
                std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                assert!(!lower.starts_with("transfer-encoding"), "{line}");
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let reps: usize = env_num("BENCH_REPS", 200);
    let venv = std::env::var_os("LABPOOL_JUPYTER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/labpool-jupyter"));
    assert!(
        venv.join("bin/jupyter").exists(),
        "no JupyterLab at {}: python3 -m venv {0} && {0}/bin/pip install -r tests/python/jupyter-requirements.txt",
        venv.display()
    );
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_labpool"));
    let (dir, config, mut server) = common::start_labpool(&bin, "lp-bench-notebook-", |t| {
        t.replace("listen = \"127.0.0.1:9402\"", "listen = \"127.0.0.1:0\"")
    });
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cli = |args: &[&str]| {
        Command::new(&bin)
            .args(args)
            .env("LABPOOL_CONFIG", &config)
            .env("PATH", &path)
            .current_dir(&work)
            .output()
            .unwrap()
    };
    let t0 = Instant::now();
    while !cli(&["nodes"]).status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the pool did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let t0 = Instant::now();
    let out = cli(&["notebook", "-G", "1", "--json"]);
    let answered = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let opened: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = opened["job_id"].as_u64().unwrap();
    let url = opened["url"].as_str().unwrap();
    let addr = std::fs::read_to_string(dir.path().join("state/web.addr"))
        .unwrap()
        .trim()
        .to_string();
    let (status, head) = get(&addr, &url[url.find("/login").unwrap()..], "");
    assert_eq!(status, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    let t = Instant::now();
    let (status, head) = get(
        &addr,
        &format!("/notebooks/{job}/lab"),
        &format!("Cookie: {cookie}\r\n"),
    );
    let page = t.elapsed().as_secs_f64();
    assert_eq!(status, 200, "{head}");
    let usable = t0.elapsed().as_secs_f64();

    // JupyterLab's own port and token, to send the same request straight to it.
    let want = format!("--ServerApp.base_url=/notebooks/{job}/");
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == want.as_bytes()))
        })
        .expect("JupyterLab runs");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let port: u16 = cmdline
        .split(|b| *b == 0)
        .find_map(|a| {
            std::str::from_utf8(a)
                .ok()?
                .strip_prefix("--port=")?
                .parse()
                .ok()
        })
        .unwrap();
    let token = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .find_map(|v| {
            std::str::from_utf8(v)
                .ok()?
                .strip_prefix("JUPYTER_TOKEN=")
                .map(str::to_string)
        })
        .unwrap();
    let api = format!("/notebooks/{job}/api/status");
    let direct_addr = format!("127.0.0.1:{port}");
    let time = |addr: &str, headers: &str| -> Vec<f64> {
        (0..reps + 5)
            .map(|_| {
                let t = Instant::now();
                let (status, head) = get(addr, &api, headers);
                assert_eq!(status, 200, "{head}");
                t.elapsed().as_secs_f64() * 1000.0
            })
            .skip(5)
            .collect()
    };
    // Interleaved rounds, so that neither side has the machine to itself.
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        direct.extend(time(
            &direct_addr,
            &format!("Authorization: token {token}\r\n"),
        ));
        proxied.extend(time(&addr, &format!("Cookie: {cookie}\r\n")));
    }
    let (d50, p50) = (median(direct.clone()), median(proxied.clone()));
    let (d95, p95) = (percentile(direct, 0.95), percentile(proxied, 0.95));
    // And on kept-alive connections, as a page's later requests go: what the proxy itself adds.
    let (mut warm_direct, mut warm_proxied) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        warm_direct.extend(kept_alive(
            &direct_addr,
            &api,
            &format!("Authorization: token {token}\r\n"),
            reps,
        ));
        warm_proxied.extend(kept_alive(
            &addr,
            &api,
            &format!("Cookie: {cookie}\r\n"),
            reps,
        ));
    }
    let (wd50, wp50) = (median(warm_direct.clone()), median(warm_proxied.clone()));
    let (wd95, wp95) = (
        percentile(warm_direct, 0.95),
        percentile(warm_proxied, 0.95),
    );
    println!(
        "notebook {job}: `labpool notebook` returned with JupyterLab answering in {answered:.2} s; its page through the dashboard {:.0} ms; usable {usable:.2} s after the command started (aim: 10 s)",
        page * 1000.0
    );
    println!(
        "GET {api}, {} each way, fresh connection each (ms):",
        reps * 4
    );
    println!("{:<32} {:>7} {:>7}", "", "p50", "p95");
    println!("{:<32} {d50:>7.2} {d95:>7.2}", "JupyterLab's port, direct");
    println!(
        "{:<32} {p50:>7.2} {p95:>7.2}",
        "through the dashboard's proxy"
    );
    println!(
        "proxy adds {:.2} ms at p50 ({:.2}x), {:.2} ms at p95 (aim: under 2 ms)",
        p50 - d50,
        p50 / d50,
        p95 - d95
    );
    println!("the same on one kept-alive connection each:");
    println!(
        "{:<32} {wd50:>7.2} {wd95:>7.2}",
        "JupyterLab's port, direct"
    );
    println!(
        "{:<32} {wp50:>7.2} {wp95:>7.2}",
        "through the dashboard's proxy"
    );
    println!(
        "proxy adds {:.2} ms at p50 ({:.2}x), {:.2} ms at p95 (aim: under 2 ms)",
        wp50 - wd50,
        wp50 / wd50,
        wp95 - wd95
    );
    let _ = cli(&["cancel", &job.to_string()]);
    let _ = server.kill();
    let _ = server.wait();
}
