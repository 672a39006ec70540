//! `labpool report` and `labpool usage` on a real pool's history: the CSV's GPU-hours, job
//! counts, outcomes and waits agree with a computation by hand from `history --json`, the HTML
//! is one page with its charts and no script, the same range gives the same bytes, and members
//! see only their own use.

use crate::pool::{Pool, ensure_user, have_root, s};
use serde_json::Value;
use std::time::Duration;

/// The value of one `section,key,metric` line of a CSV report.
fn csv_value(csv: &str, section: &str, key: &str, metric: &str) -> f64 {
    csv.lines()
        .find(|l| l.starts_with(&format!("{section},{key},{metric},")))
        .and_then(|l| l.rsplit(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {section},{key},{metric} in:\n{csv}"))
}

fn ms(v: &Value, key: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s(v, key))
        .unwrap()
        .timestamp_millis()
}

#[test]
fn the_report_agrees_with_the_history() {
    let mut pool = Pool::new("2:rtx4090");
    pool.start();
    let ids = [
        pool.submit(&["--gres=gpu:2", "--wrap", "sleep 1"]),
        pool.submit(&["--gres=gpu:1", "--wrap", "sleep 2"]),
        pool.submit(&["--gres=gpu:1", "--wrap", "sleep 1; exit 3"]),
        pool.submit(&["--wrap", "true"]),
    ];
    for id in ids {
        pool.wait_done(id, Duration::from_secs(30));
    }
    let month = chrono::Local::now().format("%Y-%m").to_string();
    let csv = pool.ok(&["report", "--month", &month, "--format", "csv"]);

    // By hand: GPUs x (end - start) over the jobs that held GPUs.
    let history: Vec<Value> = serde_json::from_str(&pool.ok(&["history", "--json"])).unwrap();
    let mut gpu_hours = 0.0;
    let mut waits: Vec<i64> = Vec::new();
    for j in &history {
        let gpus = j["gpus"].as_array().unwrap().len() as f64;
        gpu_hours += gpus * (ms(j, "end_time") - ms(j, "start_time")) as f64 / 3.6e6;
        waits.push((ms(j, "start_time") - ms(j, "submit_time")) / 1000);
    }
    waits.sort_unstable();
    let me = s(&history[0], "user").to_string();
    let got = csv_value(&csv, "use_by_user", &me, "gpu_hours");
    assert!(
        (got - gpu_hours).abs() < 0.0002,
        "{got} against {gpu_hours}:\n{csv}"
    );
    assert_eq!(
        csv_value(&csv, "use_by_user", &me, "jobs"),
        3.0,
        "the CPU job holds no GPU"
    );
    assert_eq!(csv_value(&csv, "outcomes", "COMPLETED", "jobs"), 3.0);
    assert_eq!(csv_value(&csv, "outcomes", "FAILED", "jobs"), 1.0);
    let p50 = waits[(waits.len() as f64 * 0.5).ceil() as usize - 1];
    assert_eq!(
        csv_value(&csv, "waits_by_partition", "normal", "p50_s"),
        p50 as f64
    );
    assert_eq!(csv_value(&csv, "pool", "all", "gpus"), 2.0);
    assert_eq!(csv_value(&csv, "leaderboard", &me, "rank"), 1.0);

    assert_eq!(csv_value(&csv, "pool", "all", "jobs"), 4.0, "{csv}");

    // HTML: one page, its charts inline, no script. (The same bytes for the same history is
    // checked in labpool-reports; a month in progress moves with the clock.)
    let a = pool.dir.join("a.html");
    pool.ok(&["report", "--month", &month, "--out", a.to_str().unwrap()]);
    let html = std::fs::read_to_string(&a).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.matches("<svg").count() >= 3, "{html}");
    assert!(
        !html.contains("<script") && !html.contains(" src="),
        "{html}"
    );
    assert!(
        html.contains("4 jobs in the range, 3 of them held GPUs"),
        "{html}"
    );
    // A range that has ended gives the same bytes each time.
    let a = pool.ok(&["report", "--from", "2026-01-01", "--to", "2026-01-31"]);
    let b = pool.ok(&["report", "--from", "2026-01-01", "--to", "2026-01-31"]);
    assert_eq!(a, b);
    // Storage: a snapshot of home, deduplicated in the repository.
    let home = pool.dir.join("shared/home");
    std::fs::create_dir_all(home.join("a")).unwrap();
    for name in ["one", "two"] {
        std::fs::write(home.join("a").join(name), vec![7u8; 256 << 10]).unwrap();
    }
    pool.ok(&["snapshot", "create", "--source", "home"]);
    let json: Value =
        serde_json::from_str(&pool.ok(&["report", "--month", &month, "--format", "json"])).unwrap();
    assert_eq!(json["total"]["jobs"], 3);
    let logical = json["storage"]["snapshot_logical_bytes"].as_u64().unwrap();
    let stored = json["storage"]["snapshot_stored_bytes"].as_u64().unwrap();
    assert!(logical >= 512 << 10, "{json:#}");
    assert!(
        stored > 0 && stored < logical / 2,
        "two equal files are stored once: {json:#}"
    );

    // A bad range is refused, naming it.
    let out = pool.cli(&["report", "--from", "2026-12-05", "--to", "2026-12-01"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is after --to"));

    let usage = pool.ok(&["usage"]);
    assert!(
        usage.contains("GPU-hours") && usage.contains(&month),
        "{usage}"
    );
}

/// A month in progress ends now: a 2-GPU job still running is counted for the seconds it has
/// run, not to the month's end, and a job cancelled while it waited stops wanting GPUs.
#[test]
fn a_month_in_progress_counts_no_future() {
    let mut pool = Pool::new("2:rtx4090");
    pool.start();
    let running = pool.submit(&["--gres=gpu:2", "--wrap", "sleep 300"]);
    pool.wait_for(running, Duration::from_secs(30), |j| {
        j["state"] == "RUNNING"
    });
    let waiting = pool.submit(&["--gres=gpu:2", "--wrap", "true"]);
    pool.ok(&["cancel", &waiting.to_string()]);
    std::thread::sleep(Duration::from_secs(2));
    let month = chrono::Local::now().format("%Y-%m").to_string();
    let csv = pool.ok(&["report", "--month", &month, "--format", "csv"]);
    // Two GPUs for the seconds since it started: well under a GPU-hour.
    let hours = csv_value(&csv, "use_total", "all", "gpu_hours");
    assert!(hours > 0.0 && hours < 0.1, "{hours} GPU-hours:\n{csv}");
    // The cancelled job asked for 2 GPUs while both were held, for under a second.
    let idle = csv_value(&csv, "pool", "all", "idle_with_demand_gpu_hours");
    assert!(idle < 0.01, "{idle} GPU-hours idle with demand:\n{csv}");
    assert_eq!(csv_value(&csv, "outcomes", "RUNNING", "jobs"), 1.0, "{csv}");
    assert_eq!(
        csv_value(&csv, "outcomes", "CANCELLED", "jobs"),
        1.0,
        "{csv}"
    );
    let today = chrono::Local::now().format("%Y-%m-%d").to_string();
    let days: Vec<&str> = csv
        .lines()
        .filter(|l| l.starts_with("utilisation_by_day,"))
        .map(|l| l.split(',').nth(1).unwrap())
        .collect();
    assert!(
        days.last().is_some_and(|d| *d <= today.as_str())
            && days.iter().all(|d| *d <= today.as_str()),
        "no bar for a day that has not happened: {days:?}"
    );
    let usage = pool.ok(&["usage"]);
    let line = usage.lines().find(|l| l.starts_with("GPU-hours")).unwrap();
    let now: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(now < 0.1, "usage counts the future: {usage}");
    pool.ok(&["cancel", &running.to_string()]);
}

#[test]
fn members_see_their_own_usage_and_not_the_pools_report() {
    if !have_root("members_see_their_own_usage_and_not_the_pools_report") {
        return;
    }
    let (uid, gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:rtx4090").for_users();
    pool.start();
    let out = pool.cli_as(uid, gid, &["report", "--format", "csv"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only admins may see the pool's report"),
        "{out:?}"
    );
    let out = pool.cli_as(uid, gid, &["usage", "--user", "root"]);
    assert!(!out.status.success(), "{out:?}");
    let out = pool.cli_as(uid, gid, &["usage", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["user"], "lp-alice");
    assert_eq!(v["month"]["total"]["jobs"], 0);
}

/// The pool's own month replayed through the simulator: on today's pool the waits come out as
/// they were; with two more GPUs nobody waits.
#[test]
fn a_replay_of_the_pools_history_matches_its_waits_and_answers_what_if() {
    let mut pool = Pool::new("2:rtx4090");
    pool.start();
    let ids: Vec<u64> = (0..4)
        .map(|_| pool.submit(&["--gres=gpu:1", "--wrap", "sleep 3"]))
        .collect();
    for id in &ids {
        pool.wait_done(*id, Duration::from_secs(30));
    }
    let month = chrono::Local::now().format("%Y-%m").to_string();
    let out: Value = serde_json::from_str(&pool.ok(&[
        "sim",
        "--from-history",
        "--month",
        &month,
        "--nodes",
        "+1x2:a100",
        "--json",
    ]))
    .unwrap();
    assert_eq!(out["jobs"], 4, "{out:#}");
    let recorded = out["recorded"]["p95_wait_s"].as_f64().unwrap();
    assert!(
        (2.5..6.0).contains(&recorded),
        "two jobs waited for a 3 s job: {out:#}"
    );
    let today = out["replays"][0]["p95_wait_s"].as_f64().unwrap();
    assert!(
        (today - recorded).abs() <= 1.5,
        "replay {today} against recorded {recorded}: {out:#}"
    );
    let bigger = out["replays"][1]["p95_wait_s"].as_f64().unwrap();
    assert!(bigger < 0.5, "with 2 more GPUs nobody waits: {out:#}");
    let text = pool.ok(&["sim", "--from-history", "--month", &month]);
    assert!(
        text.contains("recorded: p50 wait") && text.contains("today's pool"),
        "{text}"
    );
    let out = pool.cli(&["sim", "--from-history", "--month", "1999-01"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to replay"));

    // The report's what-if section holds the same replay.
    let csv = pool.ok(&[
        "report",
        "--month",
        &month,
        "--format",
        "csv",
        "--what-if",
        "+1x2:a100",
    ]);
    assert_eq!(csv_value(&csv, "what_if", "+1x2:a100", "jobs"), 4.0);
    assert_eq!(
        csv_value(&csv, "what_if", "today", "p95_wait_s"),
        today,
        "{csv}"
    );
    assert_eq!(
        csv_value(&csv, "what_if", "proposed", "p95_wait_s"),
        bigger,
        "{csv}"
    );
    assert_eq!(
        csv_value(&csv, "what_if", "recorded", "p95_wait_s"),
        recorded,
        "{csv}"
    );
    let html = pool.ok(&["report", "--month", &month, "--what-if", "+1x2:a100"]);
    assert!(html.contains("<h2>What if: +1x2:a100</h2>"), "{html}");
    let out = pool.cli(&["report", "--month", &month, "--what-if", "2x8"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("+COUNTxGPUS"));
}

/// `GET /v1/report` as a process of `uid`, straight on the socket as any client could send
/// it; the status code.
fn report_as(pool: &crate::pool::Pool, uid: u32, gid: u32, query: &str) -> u16 {
    let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(("GET /v1/report?" + sys.argv[2] + " HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.split(b" ")[1].decode())
"#;
    let out = std::process::Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--init-groups".to_string(),
            "/usr/bin/python3".to_string(),
            "-c".to_string(),
            script.to_string(),
        ])
        .arg(pool.dir.join("labpool.sock"))
        .arg(query)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))
}

/// A member's report request cannot stall the controller: a range of 20,000 years is refused
/// (it built a 150 MB answer), a year of one's own still comes, and while four admin reports
/// of ten years are built, `ping` answers at once.
#[test]
fn report_ranges_are_bounded_and_reports_never_hold_up_other_requests() {
    if !have_root("report_ranges_are_bounded_and_reports_never_hold_up_other_requests") {
        return;
    }
    let (alice, gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("2:t4").for_users();
    pool.start();
    let day = 86_400_000i64;
    let now = chrono::Utc::now().timestamp_millis();
    let mine = |from: i64| format!("from_ms={from}&to_ms={now}&label=x&user=lp-alice");
    assert_eq!(
        report_as(&pool, alice, gid, &mine(now - 20_000 * 365 * day)),
        400
    );
    assert_eq!(report_as(&pool, alice, gid, &mine(now - 401 * day)), 400);
    assert_eq!(report_as(&pool, alice, gid, &mine(now - 365 * day)), 200);
    let (status, answer) = crate::pool::get_raw(
        &pool.dir.join("labpool.sock"),
        &format!("/v1/report?from_ms=0&to_ms={now}&label=x"),
    );
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("a report covers at most 3660"),
        "{answer}"
    );
    let sock = pool.dir.join("labpool.sock");
    let reports: Vec<_> = (0..4)
        .map(|_| {
            let (sock, q) = (
                sock.clone(),
                format!(
                    "/v1/report?from_ms={}&to_ms={now}&label=x",
                    now - 3650 * day
                ),
            );
            std::thread::spawn(move || crate::pool::get_raw(&sock, &q).0)
        })
        .collect();
    let t0 = std::time::Instant::now();
    let (status, _) = crate::pool::get_raw(&sock, "/v1/ping");
    assert_eq!(status, 200);
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "ping took {:?} beside four reports",
        t0.elapsed()
    );
    for r in reports {
        assert_eq!(r.join().unwrap(), 200);
    }
    pool.stop();
}
