//! Notebooks in the browser: `labpool notebook` starts JupyterLab (from PyPI, in the venv
//! `scripts/test` makes) inside a job as its owner; a real headless Chromium follows the link it
//! prints, lands on JupyterLab through the dashboard, and runs a cell over the kernel's
//! WebSocket that prints the job's `CUDA_VISIBLE_DEVICES`. The job's page shows the Open button.
//! Another member is refused with the dashboard's words and gets no byte of the notebook.

use crate::browser::Browser;
use crate::pool::{Pool, ensure_user, have_root, have_tool};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The JupyterLab venv `scripts/test` makes (`LABPOOL_JUPYTER`), or None (a skip, refused when
/// the run is strict).
pub fn jupyter_venv(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("LABPOOL_JUPYTER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/labpool-jupyter"));
    if dir.join("bin/jupyter").exists() {
        return Some(dir);
    }
    assert!(
        std::env::var("LABPOOL_TEST_STRICT").as_deref() != Ok("1"),
        "{test} needs JupyterLab in {} (scripts/test installs it)",
        dir.display()
    );
    eprintln!("SKIPPED {test}: no JupyterLab venv at {}", dir.display());
    None
}

/// Runs the CLI as `who` with `home` as HOME and the JupyterLab venv first on PATH.
fn cli_as(
    pool: &Pool,
    who: (u32, u32),
    name: &str,
    venv: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    let home = pool.work.join(format!("home-{name}"));
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(who.0), Some(who.1)).unwrap();
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        venv.join("bin").display()
    );
    Command::new("setpriv")
        .args([
            format!("--reuid={}", who.0),
            format!("--regid={}", who.1),
            "--init-groups".to_string(),
        ])
        .arg(&pool.bin)
        .args(args)
        .env("LABPOOL_CONFIG", &pool.config)
        .env("USER", name)
        .env("HOME", &home)
        .env("PATH", path)
        .current_dir(&home)
        .output()
        .unwrap()
}

/// Runs a cell in the notebook's kernel from the page, over the proxied REST API and the
/// kernel's WebSocket, and returns what it printed.
const RUN_CELL: &str = r#"
(async () => {
  const base = location.pathname.split('/lab')[0] + '/';
  const xsrf = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '';
  const k = await (await fetch(base + 'api/kernels', { method: 'POST', headers: { 'X-XSRFToken': xsrf, 'Content-Type': 'application/json' }, body: '{}' })).json();
  const ws = new WebSocket(`ws://${location.host}${base}api/kernels/${k.id}/channels`);
  const id = 'labpool-' + Date.now();
  return await new Promise((done, fail) => {
    let out = '';
    setTimeout(() => fail('no answer from the kernel: ' + out), 60000);
    ws.onerror = e => fail('websocket error');
    ws.onopen = () => ws.send(JSON.stringify({
      header: { msg_id: id, msg_type: 'execute_request', username: 'test', session: id, version: '5.3', date: new Date().toISOString() },
      parent_header: {}, metadata: {}, channel: 'shell', buffers: [],
      content: { code: 'import os; print("CVD=[" + os.environ.get("CUDA_VISIBLE_DEVICES", "") + "]")', silent: false, store_history: false, user_expressions: {}, allow_stdin: false, stop_on_error: true },
    }));
    ws.onmessage = m => {
      const msg = JSON.parse(m.data);
      if (msg.parent_header.msg_id !== id) return;
      if (msg.msg_type === 'stream') out += msg.content.text;
      // The kernel is idle again once every output of the cell has been sent.
      if (msg.msg_type === 'status' && msg.content.execution_state === 'idle') { ws.close(); done(out); }
    };
  });
})()
"#;

#[test]
fn a_notebook_opens_through_the_dashboard_for_its_owner_only() {
    let name = "a_notebook_opens_through_the_dashboard_for_its_owner_only";
    if !have_root(name) || !have_tool(name, "chromium") {
        return;
    }
    let Some(venv) = jupyter_venv(name) else {
        return;
    };
    let alice = ensure_user("lp-alice");
    let bob = ensure_user("lp-bob");
    let mut pool = Pool::new("2:rtx4090").for_users();
    pool.start();
    let t0 = Instant::now();
    let out = cli_as(
        &pool,
        alice,
        "lp-alice",
        &venv,
        &["notebook", "-G", "1", "--json"],
    );
    assert!(
        out.status.success(),
        "{}{}\nthe notebook's output:\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(pool.dir.join("serve.out")).unwrap_or_default(),
        pool.job(1)["stdout"]
            .as_str()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    );
    let started = t0.elapsed();
    let opened: Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = opened["job_id"].as_u64().unwrap();
    assert_eq!(opened["path"], format!("/notebooks/{job}/lab"));

    let mut b = Browser::start("en");
    b.open(opened["url"].as_str().unwrap());
    let end = Instant::now() + Duration::from_secs(60);
    // Loaded: the lab's shell and its launcher drawn by JupyterLab's own scripts, fetched
    // through the proxy, past the splash screen.
    while b.eval("!!document.querySelector('.jp-LabShell .jp-Launcher')") != Value::Bool(true) {
        assert!(
            Instant::now() < end,
            "JupyterLab did not load: {} {}",
            b.url(),
            b.text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let page = t0.elapsed();
    assert!(
        b.url().ends_with(&format!("/notebooks/{job}/lab")),
        "{}",
        b.url()
    );
    let printed = b.eval(RUN_CELL);
    assert_eq!(
        printed.as_str().unwrap_or("").trim(),
        "CVD=[0]",
        "{printed}"
    );
    eprintln!(
        "notebook {job}: JupyterLab answered {started:?} after `labpool notebook`, its page loaded {page:?} after"
    );
    b.screenshot("notebook-lab");
    // JupyterLab's page holds its token for its own calls, as any JupyterLab's does: it is
    // hers, and she never had to copy it.
    let token = std::fs::read_to_string(format!("/proc/{}/environ", jupyter_pid(job)))
        .unwrap_or_default()
        .split('\0')
        .find_map(|v| v.strip_prefix("JUPYTER_TOKEN=").map(str::to_string))
        .expect("JupyterLab's token");
    assert!(
        !opened.to_string().contains(&token),
        "the token was printed"
    );

    // The job's page has the Open button, for her.
    let base = b.url().split("/notebooks/").next().unwrap().to_string();
    b.open(&format!("{base}/jobs/{job}"));
    let href = b.eval("(document.querySelector('a.notebook') || {}).href || ''");
    assert_eq!(href, format!("{base}/notebooks/{job}/lab"));

    // Bob, logged in to the dashboard, asks for her notebook: refused, no byte of it.
    let bob_login = {
        let o = pool.cli_as(bob.0, bob.1, &["web", "--json", "--next", "/"]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["url"].as_str().unwrap().to_string()
    };
    let mut other = Browser::start("en");
    other.open(&bob_login);
    other.open(&format!("{base}/notebooks/{job}/lab"));
    let said = other.text();
    assert!(
        said.contains(&format!(
            "job {job} is lp-alice's; you (lp-bob) may open only your own notebooks"
        )),
        "{said}"
    );
    let status = other.eval(&format!(
        "fetch('/notebooks/{job}/api/kernels').then(r => r.status + ' ' + r.headers.get('server'))"
    ));
    assert_eq!(status, "403 null", "bob reached JupyterLab");
    other.open(&format!("{base}/jobs/{job}"));
    assert_eq!(
        other.eval("document.querySelectorAll('a.notebook').length"),
        0
    );
    pool.ok(&["cancel", &job.to_string()]);
}

/// The pid of the JupyterLab server of job `job` (its command line names its base path).
fn jupyter_pid(job: u64) -> u32 {
    let want = format!("--ServerApp.base_url=/notebooks/{job}/");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == want.as_bytes()))
        })
        .expect("JupyterLab runs")
}
