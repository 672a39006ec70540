//! The job side of a notebook (`labpool notebook`): JupyterLab from the job's own environment
//! (the first `jupyter` on its PATH), with the job's GPUs, datasets and slice, listening on the
//! node's loopback at the job's second leased port, under `/notebooks/JOB/` as the dashboard
//! serves it, with the token `labpool notebook` made (passed in its environment, never on a
//! command line others can read). Its kernels' activity (JupyterLab's `/api/kernels`) is reported
//! to the controller as a session's keys are, so the idle rule sees a notebook computing or
//! edited; where the controller cannot be reached, the host stops JupyterLab after `idle`
//! without activity.

use crate::api::sessions::{NOTEBOOK_TOKEN_VAR, notebook_base, notebook_port};
use crate::env_vars::{LABPOOL_JOB_ID, LABPOOL_PORTS};
use http_body_util::Full;
use hyper::body::Bytes;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// Runs JupyterLab for this job until it exits, or until it has been idle for `idle` while the
/// controller cannot be reached; returns its exit code.
pub fn run(idle: Duration, controller: Option<PathBuf>) -> i32 {
    let env = |k: &str| std::env::var(k).ok();
    let job = env(LABPOOL_JOB_ID).and_then(|j| j.parse::<u64>().ok());
    let port = env(LABPOOL_PORTS)
        .and_then(|p| p.split('-').next().and_then(|f| f.parse::<u16>().ok()))
        .and_then(notebook_port);
    let (Some(job), Some(port), Some(token)) = (job, port, env(NOTEBOOK_TOKEN_VAR)) else {
        eprintln!(
            "labpool notebook: this job has no id, leased ports or notebook token: start notebooks with `labpool notebook`"
        );
        return 2;
    };
    let Some(jupyter) = labpool_envs::tools::which("jupyter") else {
        eprintln!(
            "labpool notebook: JupyterLab is not in this job's environment (no `jupyter` on its PATH)\nhint: add jupyterlab to the environment's packages (labpool env create NAME --file requirements.txt, then labpool notebook --env NAME), or pip install jupyterlab where your PATH finds it"
        );
        return 127;
    };
    let base = notebook_base(job);
    let root = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    // JupyterLab's connection files, in a fresh private directory (0700, a random name) rather
    // than under a home that may be missing or shared; removed when the host ends.
    let runtime = tempfile::Builder::new()
        .prefix("labpool-notebook-")
        .tempdir()
        .ok();
    let mut jupyter_cmd = Command::new(&jupyter);
    jupyter_cmd.arg("lab");
    // A job of root's (a one-box pool run by its admin) runs as root: JupyterLab refuses that
    // unless told, and the job already is root's.
    if nix::unistd::geteuid().is_root() {
        jupyter_cmd.arg("--allow-root");
    }
    if let Some(dir) = &runtime
        && std::env::var_os("JUPYTER_RUNTIME_DIR").is_none()
    {
        jupyter_cmd.env("JUPYTER_RUNTIME_DIR", dir.path());
    }
    let mut child = match jupyter_cmd
        .args([
            "--no-browser",
            "--ip=127.0.0.1",
            &format!("--port={port}"),
            "--ServerApp.port_retries=0",
            &format!("--ServerApp.base_url={base}"),
            // Reached only through the dashboard's proxy, which shows the token: its Host is
            // the dashboard's name.
            "--ServerApp.allow_remote_access=True",
            &format!("--ServerApp.root_dir={}", root.display()),
            // Nodes often have no internet: no news or update checks.
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ])
        .env("JUPYTER_TOKEN", &token)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("labpool notebook: cannot start {}: {e}", jupyter.display());
            return 127;
        }
    };
    let last_active = Arc::new(AtomicI64::new(crate::clock::now_ms()));
    let seen = last_active.clone();
    let mut last_status = String::new();
    let probe = Box::new(move |rt: &tokio::runtime::Runtime| {
        // The kernels' own clock: one that ran since the last look, or one running now. An open
        // browser tab alone is not activity.
        let Some((status, busy)) = rt.block_on(kernels(port, &base, &token)) else {
            return false;
        };
        let active = busy || status != last_status;
        last_status = status;
        if active {
            seen.store(crate::clock::now_ms(), Ordering::Relaxed);
        }
        active
    });
    let answered = super::report::start(
        controller,
        Some(job),
        idle,
        probe,
        Box::new(|text: &str| eprintln!("{}", text.trim())),
    );
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.code().unwrap_or(1),
            Ok(None) => {}
            Err(_) => return 1,
        }
        let now = crate::clock::now_ms();
        let limit = idle.as_millis() as i64;
        if now - last_active.load(Ordering::Relaxed) > limit
            && now - answered.load(Ordering::Relaxed) > limit
        {
            eprintln!(
                "labpool: this notebook had no activity for {}; it stops now and its GPUs go back to the pool",
                labpool_units::format_duration(idle)
            );
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let _ = child.wait();
            return 0;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// JupyterLab's kernels: each one's id and last activity, and whether one is busy now; `None`
/// while it does not answer.
async fn kernels(port: u16, base: &str, token: &str) -> Option<(String, bool)> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let req = hyper::Request::builder()
        .uri(format!("{base}api/kernels"))
        .header("host", format!("127.0.0.1:{port}"))
        .header("authorization", format!("token {token}"))
        .body(Full::new(Bytes::new()))
        .ok()?;
    let (code, body) = crate::http1::exchange(stream, req, 1 << 20).await.ok()?;
    if !code.is_success() {
        return None;
    }
    let v: Vec<serde_json::Value> = serde_json::from_slice(&body).ok()?;
    let busy = v.iter().any(|k| k["execution_state"] == "busy");
    let clocks: Vec<String> = v
        .iter()
        .map(|k| format!("{}@{}", k["id"], k["last_activity"]))
        .collect();
    Some((clocks.join(","), busy))
}
