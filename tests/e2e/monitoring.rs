//! Seeing the pool, against the scripted fake NVML: a hot GPU fires on the webhook and
//! resolves, two jobs sharing a card get their own utilisation, a job at 0% is a zombie whose
//! member is told, a job's usage is kept with it, and `/metrics` passes `promtool check
//! metrics` and carries every series the Grafana dashboard asks for.

use crate::nodes::{http, http_exchange};
use crate::nvml::build_fake_nvml;
use crate::pool::{Pool, have_tool, read_line, s, webhook};
use labpool_testkit::wait::pid_of;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// Rewrites the fake NVML's script atomically (every NVML call re-reads it).
fn script(lib: &Path, text: &str) {
    crate::nvml::script(lib.parent().unwrap(), text);
}

/// A pool on the fake NVML's GPUs, sampled every 200 ms, metrics on a port of its own, alerts
/// to `hook`; `extra` is appended to the config.
fn pool_on(lib: &Path, hook: &str, extra: &str) -> Pool {
    crate::nvml::on_fake_nvml(lib, |t| {
        format!("{t}\n[alerts]\nwebhook = \"{hook}\"\n{extra}")
    })
}

/// The controller's `/metrics` page.
fn metrics(pool: &Pool) -> String {
    get_metrics(&pool.dir.join("state/metrics.addr"))
}

/// `GET path` on the metrics listener of the daemon that wrote its address to `addr_file`:
/// the status and the body.
pub fn get_page(addr_file: &Path, path: &str) -> (u16, String) {
    let addr = read_line(addr_file);
    http(
        addr.trim(),
        &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n"),
        b"",
    )
}

/// The `/metrics` page of the daemon that wrote its address to `addr_file`, checked to be
/// served as Prometheus text.
pub fn get_metrics(addr_file: &Path) -> String {
    let addr = read_line(addr_file);
    let (head, body) = http_exchange(addr.trim(), "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n", b"");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body
}

/// Waits for a webhook body that contains every one of `parts`; returns it.
fn wait_hook(rx: &Receiver<String>, parts: &[&str], within: Duration) -> String {
    let end = Instant::now() + within;
    let mut seen = Vec::new();
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(b) if parts.iter().all(|p| b.contains(p)) => return b,
            Ok(b) => seen.push(b),
            Err(_) => break,
        }
    }
    panic!(
        "no webhook body with {parts:?} within {within:?}; got:\n{}",
        seen.join("\n")
    );
}

/// Waits until the metrics page has a line starting with `prefix`; returns that line.
fn wait_metric(pool: &Pool, prefix: &str) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let page = metrics(pool);
        if let Some(l) = page.lines().find(|l| l.starts_with(prefix)) {
            return l.to_string();
        }
        assert!(Instant::now() < end, "no {prefix:?} on the page:\n{page}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_hot_gpu_fires_on_the_webhook_and_resolves_when_it_cools() {
    let build = tempfile::tempdir().unwrap();
    let Some(lib) = build_fake_nvml("a_hot_gpu_fires_on_the_webhook", build.path()) else {
        return;
    };
    script(&lib, "count 2\ntemp 1 91\nxid 0 1 79\n");
    let (hook, rx) = webhook();
    let (relay, mails) = crate::job_mail::smtp_sink();
    let pool = pool_on(
        &lib,
        &hook,
        &format!(
            "gpu_temp_for = \"1s\"\nmail_to = [\"admins@lab.example\"]\n[mail]\nsmtp = \"{relay}\"\n"
        ),
    );
    let node = s(&pool_nodes(&pool)[0], "name").to_string();
    let fired = wait_hook(
        &rx,
        &["[FIRING] gpu_temperature", &format!("{node}/gpu1"), "91"],
        Duration::from_secs(20),
    );
    assert!(fired.contains("\"status\":\"firing\""), "{fired}");
    // And by mail to the admins.
    let mailed = crate::job_mail::wait_mail(&mails, "[FIRING] gpu_temperature", &mut Vec::new());
    assert_eq!(mailed.to, "admins@lab.example");
    assert!(
        mailed.data.contains("is at 91 =C2=B0C") || mailed.data.contains("is at 91"),
        "{}",
        mailed.data
    );
    let alerts: Value = serde_json::from_str(&pool.ok(&["alerts", "--json"])).unwrap();
    let firing = alerts["firing"].as_array().unwrap();
    assert!(
        firing
            .iter()
            .any(|a| a["rule"] == "gpu_temperature" && a["subject"] == format!("{node}/gpu1")),
        "{alerts}"
    );
    assert!(
        !firing
            .iter()
            .any(|a| a["subject"] == format!("{node}/gpu0")),
        "{alerts}"
    );
    let table = pool.ok(&["alerts"]);
    assert!(
        table.contains("FIRING") && table.contains("gpu_temperature"),
        "{table}"
    );
    let line = wait_metric(&pool, "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"");
    assert!(line.ends_with(" 91"), "{line}");
    assert!(
        line.contains("modelName=\"NVIDIA GeForce RTX 4090\""),
        "{line}"
    );
    // The XID the driver reported (through NVML's event API), as dcgm-exporter shows it.
    let xid = wait_metric(&pool, "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"");
    assert!(xid.ends_with(" 79"), "{xid}");

    // 82 °C is between the marks: still firing. 70 °C resolves it.
    script(&lib, "count 2\ntemp 1 82\n");
    std::thread::sleep(Duration::from_secs(1));
    let alerts: Value = serde_json::from_str(&pool.ok(&["alerts", "--json"])).unwrap();
    assert_eq!(alerts["firing"].as_array().unwrap().len(), 1, "{alerts}");
    script(&lib, "count 2\ntemp 1 70\n");
    wait_hook(
        &rx,
        &["[RESOLVED] gpu_temperature", &format!("{node}/gpu1")],
        Duration::from_secs(20),
    );
    let alerts: Value = serde_json::from_str(&pool.ok(&["alerts", "--json", "--all"])).unwrap();
    assert!(alerts["firing"].as_array().unwrap().is_empty(), "{alerts}");
    assert_eq!(alerts["resolved"][0]["rule"], "gpu_temperature", "{alerts}");
}

fn pool_nodes(pool: &Pool) -> Vec<Value> {
    serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap()
}

#[test]
fn shared_cards_zombies_and_usage_kept_with_the_job() {
    let build = tempfile::tempdir().unwrap();
    let Some(lib) = build_fake_nvml("shared_cards_zombies_and_usage", build.path()) else {
        return;
    };
    script(&lib, "count 2\n");
    let (hook, rx) = webhook();
    let mut pool = pool_on(
        &lib,
        &hook,
        "[zombies]\nlow_util_for = \"2s\"\ntell_admins_after = \"off\"\n",
    );
    pool.stop();
    pool.edit_config(|t| {
        t.replace("[node]\n", "[node]\ngpu_share = 2\n")
            .replace(
                "[credits]\n",
                "[credits]\nrebate_fraction = 0.5\nrebate_min_util = 0.3\n",
            )
            .replace("[metrics]\n", "[metrics]\nper_member = true\n")
    });
    pool.start();
    let work = pool.work.clone();
    let job = |name: &str, share: bool| {
        let pidfile = work.join(format!("{name}.pid"));
        let mut args = vec!["--gres=gpu:1", "-J", name];
        if share {
            args.push("--gpu-share");
        }
        let wrap = format!("echo $$ > {}; exec sleep 60", pidfile.display());
        args.extend(["--wrap", &wrap]);
        (pool.submit(&args), pidfile)
    };
    let (a, a_pid) = job("a", true);
    let (b, b_pid) = job("b", true);
    let (idle, idle_pid) = job("idle", false);
    // A held job keeps the queue's wait series on the page.
    pool.submit(&["--hold", "--gres=gpu:1", "--wrap", "true"]);
    let (a_pid, b_pid, idle_pid) = (pid_of(&a_pid), pid_of(&b_pid), pid_of(&idle_pid));
    let gpu_of = |id: u64| pool.job(id)["gpus"][0].as_u64().unwrap();
    let (shared, alone) = (gpu_of(a), gpu_of(idle));
    assert_eq!(gpu_of(b), shared);
    assert_ne!(shared, alone);
    script(
        &lib,
        &format!(
            "count 2\nutil {shared} 80 30\nfb {shared} 24564 6000\npower {shared} 300000\n\
             proc {shared} {a_pid} 4000 70\nproc {shared} {b_pid} 2000 10\n\
             util {alone} 0 0\nfb {alone} 24564 1000\nproc {alone} {idle_pid} 1000 0\n"
        ),
    );

    // Each sharing job gets its own processes' share of the card.
    let line_a = wait_metric(
        &pool,
        &format!("labpool_job_gpu_utilization_percent{{job=\"{a}\""),
    );
    assert!(line_a.ends_with(" 70"), "{line_a}");
    let line_b = wait_metric(
        &pool,
        &format!("labpool_job_gpu_utilization_percent{{job=\"{b}\""),
    );
    assert!(line_b.ends_with(" 10"), "{line_b}");
    let dcgm = wait_metric(&pool, &format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"{shared}\""));
    assert!(dcgm.contains(&format!("job=\"{a},{b}\"")), "{dcgm}");

    // The idle job is a zombie after 2 s at 0%, and its member is told.
    let me = crate::pool::stdout_of(
        &std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap(),
    );
    let told = wait_hook(
        &rx,
        &["[ZOMBIE]", &format!("job {idle}"), me.trim()],
        Duration::from_secs(20),
    );
    assert!(told.contains("below 5% utilisation for 2s"), "{told}");
    let zombies = wait_metric(&pool, "labpool_zombie_jobs{kind=\"low_util\"}");
    assert!(zombies.ends_with(" 1"), "{zombies}");

    // The slower-moving series: credits, the node cache, snapshot runs.
    for prefix in [
        "labpool_credits_balance{user=",
        "labpool_cache_capacity_bytes{node=",
        "labpool_snapshot_failing{source=\"home\"} 0",
        "labpool_snapshot_age_seconds{source=",
    ] {
        wait_metric(&pool, prefix);
    }
    let page = metrics(&pool);
    promtool_check(&page);
    dashboard_series_are_exported(&page);

    // Usage stays with the job: show, history and sacct.
    pool.ok(&["cancel", &a.to_string()]);
    pool.wait_done(a, Duration::from_secs(20));
    let shown: Value = serde_json::from_str(&pool.ok(&["show", &a.to_string(), "--json"])).unwrap();
    let usage = &shown["gpu_usage"];
    assert_eq!(usage["util_peak"], 70.0, "{shown}");
    assert_eq!(usage["mem_peak_mib"], 4000, "{shown}");
    assert!(usage["energy_kwh"].as_f64().unwrap() > 0.0, "{shown}");
    let text = pool.ok(&["show", &a.to_string()]);
    assert!(text.contains("70% peak"), "{text}");
    let history: Value = serde_json::from_str(&pool.ok(&["history", "--json"])).unwrap();
    assert_eq!(history[0]["gpu_usage"]["util_peak"], 70.0, "{history}");
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let out = std::process::Command::new(bin.join("sacct"))
        .args(["-j", &a.to_string(), "-X", "-P", "-n"])
        .arg("--format=JobID,TRESUsageInMax,ConsumedEnergy")
        .env("LABPOOL_CONFIG", &pool.config)
        .output()
        .unwrap();
    let sacct = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        sacct.contains("gres/gpumem=4000M,gres/gpuutil=70"),
        "{sacct}"
    );
    for id in [b, idle] {
        pool.ok(&["cancel", &id.to_string()]);
        pool.wait_done(id, Duration::from_secs(20));
    }
    // The rebate: half the charge back for job a (70% once the script is in, above the 30%
    // mark even with the 0% samples before it), none for b (10% at most) or the idle job.
    let credits: Value = serde_json::from_str(&pool.ok(&["credits", "--json"])).unwrap();
    let rebates: Vec<&Value> = credits["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "rebate")
        .collect();
    assert_eq!(rebates.len(), 1, "{credits:#}");
    assert_eq!(rebates[0]["job"], a, "{credits:#}");
    let note = rebates[0]["note"].as_str().unwrap();
    let mean: f64 = note
        .strip_prefix("efficient GPU use: ")
        .and_then(|n| n.strip_suffix("% mean utilisation"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!((30.0..=70.0).contains(&mean), "{credits:#}");
    let charge = credits["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["kind"] == "charge" && l["job"] == a)
        .unwrap()["amount"]
        .as_f64()
        .unwrap();
    assert!(
        (rebates[0]["amount"].as_f64().unwrap() - charge / 2.0).abs() < 1e-9,
        "{credits:#}"
    );
}

/// `promtool check metrics` finds nothing but the one lint the dcgm-exporter label `modelName`
/// earns (kept so dashboards built for dcgm-exporter work).
fn promtool_check(page: &str) {
    if !have_tool("promtool_check_metrics", "promtool") {
        return;
    }
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let problems: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            !(l.starts_with("DCGM_FI_DEV_")
                && l.ends_with("label names should be written in 'snake_case' not 'camelCase'"))
        })
        .collect();
    assert!(
        problems.is_empty(),
        "promtool check metrics:\n{said}\npage:\n{page}"
    );
    assert!(matches!(out.status.code(), Some(0) | Some(3)), "{said}");
}

/// Every series the Grafana dashboard queries is on the page.
fn dashboard_series_are_exported(page: &str) {
    let dashboard: Value = serde_json::from_str(include_str!("../../deploy/grafana/labpool.json"))
        .expect("deploy/grafana/labpool.json is JSON");
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "{exprs:?}");
    let exported: std::collections::BTreeSet<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for e in &exprs {
        for name in series_in(e) {
            assert!(
                exported.contains(name.as_str()),
                "the dashboard queries {name} ({e}), which labpool does not export"
            );
        }
    }
}

fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "query", Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// The metric names in a PromQL expression: identifiers that start with DCGM_ or labpool_.
fn series_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = expr[i..].starts_with("DCGM_") || expr[i..].starts_with("labpool_");
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if starts && boundary {
            let end = expr[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(expr.len(), |n| i + n);
            out.push(expr[i..end].to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The rules file for labs with Prometheus passes `promtool check rules`, and its fixtures (every
/// alert, before and after its "for" time) pass `promtool test rules`.
#[test]
fn prometheus_rules_pass_promtool() {
    if !have_tool("prometheus_rules_pass_promtool", "promtool") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    for args in [
        ["check", "rules", "labpool-rules.yml"],
        ["test", "rules", "labpool-rules.test.yml"],
    ] {
        let out = std::process::Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "promtool {args:?}: {out:?}");
    }
    let rules = std::fs::read_to_string(dir.join("labpool-rules.yml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("labpool-rules.test.yml")).unwrap();
    for line in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!("alertname: {line}")),
            "no fixture for {line}"
        );
    }
}

/// `/metrics` has no login and anyone on the node can read it: unless the admin opts in, it
/// names no member's credits or quota use (the API shows a member only their own).
#[test]
fn metrics_name_no_members_credits_unless_the_admin_opts_in() {
    let mut pool = Pool::new("1:t4");
    pool.edit_config(|t| t.replace("# sample_interval = \"5s\"", "sample_interval = \"200ms\""));
    pool.start();
    let go = pool.work.join("go");
    let id = pool.submit(&[
        "--gpus",
        "1",
        "--wrap",
        &format!("while [ ! -e {} ]; do sleep 0.1; done", go.display()),
    ]);
    pool.wait_for(id, Duration::from_secs(20), |j| j["state"] == "RUNNING");
    // The slower-moving series are gathered (every 6 samples), twice over.
    wait_metric(&pool, "labpool_cache_capacity_bytes{node=");
    std::thread::sleep(Duration::from_secs(3));
    let page = metrics(&pool);
    for series in ["labpool_credits_balance{", "labpool_quota_used_bytes{"] {
        assert!(
            !page.contains(series),
            "{series} served by default:\n{page}"
        );
    }
    std::fs::write(&go, "").unwrap();
    pool.stop();
}
