//! `labpool demo`: the embedded default in a temporary directory. A controller with this
//! machine's GPUs (four virtual ones where there is no driver) runs a handful of small jobs that
//! contend for them, the transitions are printed as they happen, and everything stops at the end.

use crate::api::{JobView, SubmitRequest, Submitted};
use crate::args::DemoArgs;
use crate::client::Client;
use crate::commands::init::NewConfig;
use crate::discovery::{host_cpus, host_mem_mib, host_name, nvml_gpus, nvml_library};
use crate::render::{exit_text, gpu_list, table};
use crate::settings::VirtualGpus;
use anyhow::Context;
use labpool_scheduler::{JobState, TimeLimit};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

struct DemoJob {
    name: &'static str,
    gpus: u32,
    command: String,
    time_limit: Option<TimeLimit>,
    what: &'static str,
}

fn demo_jobs(total_gpus: u32) -> Vec<DemoJob> {
    let half = (total_gpus / 2).max(1);
    let job = |name, gpus: u32, secs: u32, what| DemoJob {
        name,
        gpus: gpus.clamp(1, total_gpus),
        command: format!("echo \"$LABPOOL_JOB_NAME on GPUs $CUDA_VISIBLE_DEVICES\"; sleep {secs}"),
        time_limit: None,
        what,
    };
    vec![
        job("resnet", half, 3, "trains for 3 s"),
        job("bert", 1, 2, "trains for 2 s"),
        job("gan", 1, 2, "trains for 2 s"),
        job("eval", 1, 1, "waits for a free GPU"),
        job(
            "sweep-all",
            total_gpus,
            2,
            "needs every GPU: waits, and holds the box for itself",
        ),
        DemoJob {
            name: "typo",
            gpus: 1,
            command: "echo 'ModuleNotFoundError: no module named torchh' >&2; exit 3".into(),
            time_limit: None,
            what: "fails with exit code 3",
        },
        DemoJob {
            name: "forgot-to-stop",
            gpus: 1,
            command: "sleep 60".into(),
            time_limit: Some(TimeLimit::Seconds(3)),
            what: "runs past its 3 s limit: TERM, then KILL",
        },
    ]
}

/// Runs `labpool demo`.
pub async fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("labpool-demo-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let nvml = nvml_gpus(nvml_library(None).as_deref());
    let real = nvml.as_ref().map(|g| g.len() as u32).unwrap_or(0);
    let virtual_gpus = (real == 0).then(|| VirtualGpus {
        count: 4,
        gpu_type: "vgpu".into(),
        memory_mib: 0,
    });
    let new = NewConfig {
        dir: tmp.path().to_path_buf(),
        config_dir: tmp.path().to_path_buf(),
        node_name: host_name(),
        // The demo contends for GPUs, not cores: give the jobs room on small machines.
        cpus: host_cpus().max(16),
        mem_mib: host_mem_mib(),
        virtual_gpus: virtual_gpus.clone(),
        nvml,
        kill_grace: "1s",
        shared_root: None,
        // The demo's own directory: it must not back up or limit the machine's real homes.
        home_root: None,
        listen: None,
    };
    let config = new.write(false)?;
    crate::logging::init(&config.controller, false)?;
    let total = if real > 0 { real } else { 4 };
    let gpus_desc = match &virtual_gpus {
        Some(_) => "4 virtual GPUs (no NVIDIA driver found here)".to_string(),
        None => format!("its {real} real GPUs"),
    };
    crate::out!(
        "labpool demo: a throwaway pool in {} with {gpus_desc}",
        tmp.path().display()
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::controller::serve(
        config.clone(),
        crate::agent::node::start_embedded,
        async move {
            let _ = stop_rx.await;
        },
    ));
    let client = Client::new(&config.controller.socket);
    let log = tmp.path().join("labpool.log");
    let outcome = tokio::select! {
        r = drive(&client, &server, total, tmp.path()) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    if outcome.is_err() {
        // Leave nothing running, whatever went wrong: the shims outlive the controller by
        // design, so stop their jobs first.
        stop_all(&client).await;
    }
    let _ = stop_tx.send(());
    let stopped = server.await;
    outcome.with_context(|| format!("the demo stopped early; its log was {}", log.display()))?;
    stopped.context("the demo controller panicked")??;
    if args.keep {
        let kept = tmp.keep();
        crate::out!("Kept {} (config, database, job output).", kept.display());
    } else {
        crate::out!(
            "Stopped the controller and removed {}. Nothing is left running.",
            tmp.path().display()
        );
    }
    crate::out!(
        "Next: `{} init --dir DIR` writes a config for this machine; docs/admin/install.md shows the rest.",
        this_program()
    );
    Ok(())
}

/// How to run this program again from here: `labpool` when that name on PATH is this binary,
/// else its path (relative to the current directory when under it, as after `cargo run`).
fn this_program() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "labpool".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|dir| std::fs::canonicalize(dir.join("labpool")).is_ok_and(|p| p == me))
    });
    if on_path {
        return "labpool".into();
    }
    let cwd = std::env::current_dir().and_then(std::fs::canonicalize);
    match cwd
        .ok()
        .and_then(|c| me.strip_prefix(c).ok().map(|p| p.to_path_buf()))
    {
        Some(rel) => format!("./{}", rel.display()),
        None => me.display().to_string(),
    }
}

/// The transitions already printed, so each is printed once and in the order it happened.
#[derive(Default)]
struct Told {
    /// Per job: waiting, started and ended told.
    jobs: BTreeMap<u64, (bool, bool, bool)>,
}

impl Told {
    /// The lines for what happened since the last look, in the order it happened (an end
    /// before a start at the same moment, as a GPU is freed before it is taken). A job that
    /// started and ended between two looks still gets its start line.
    fn news<'a>(&mut self, jobs: impl Iterator<Item = &'a JobView>, t0_ms: i64) -> Vec<String> {
        let ms = |t: &Option<String>| t.as_deref().and_then(crate::clock::parse_ms);
        // (when, 0 for an end, 1 for a start, 2 for a wait, the job, its name, the line's
        // state and text)
        let mut events: Vec<(i64, u8, u64, String, &'static str, String)> = Vec::new();
        for j in jobs {
            let told = self.jobs.entry(j.id).or_default();
            if j.state == JobState::Pending && !told.0 {
                told.0 = true;
                let reason = j.reason.clone().unwrap_or_default();
                let at = crate::clock::parse_ms(&j.submit_time).unwrap_or(t0_ms);
                events.push((
                    at,
                    2,
                    j.id,
                    j.name.clone(),
                    "PENDING",
                    format!("waits: {reason}"),
                ));
            }
            if let Some(start) = ms(&j.start_time)
                && !told.1
            {
                told.1 = true;
                let what = format!("runs on GPU {}", gpu_list(&j.gpus));
                events.push((start, 1, j.id, j.name.clone(), "RUNNING", what));
            }
            let ended = !matches!(
                j.state,
                JobState::Pending | JobState::Staging | JobState::Running
            );
            if ended && !told.2 {
                told.2 = true;
                let what = match (j.exit_code, &j.reason_detail) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(d)) => d.clone(),
                    _ => String::new(),
                };
                let at = ms(&j.end_time).unwrap_or(t0_ms);
                events.push((at, 0, j.id, j.name.clone(), j.state.as_str(), what));
            }
        }
        events.sort_by_key(|(at, kind, id, ..)| (*at, *kind, *id));
        events
            .into_iter()
            .map(|(at, _, id, name, state, what)| {
                let secs = (at - t0_ms).max(0) as f64 / 1000.0;
                format!("[{secs:>5.1}s] job {id:<2} {name:<15} {state:<10} {what}")
            })
            .collect()
    }
}

/// Cancels every demo job still queued or running and waits (briefly) for them to end.
async fn stop_all(client: &Client) {
    let Ok(active) = client.get::<Vec<JobView>>("/v1/jobs").await else {
        return;
    };
    let ids: Vec<String> = active.iter().map(|j| j.id.to_string()).collect();
    if ids.is_empty() {
        return;
    }
    let _ = client
        .post::<_, Vec<crate::api::CancelOutcome>>(
            "/v1/jobs/cancel",
            &crate::api::CancelRequest { ids },
        )
        .await;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        match client.get::<Vec<JobView>>("/v1/jobs").await {
            Ok(a) if !a.is_empty() => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => return,
        }
    }
}

/// Waits for the controller, submits the demo jobs, prints their transitions and a summary.
async fn drive(
    client: &Client,
    server: &tokio::task::JoinHandle<anyhow::Result<()>>,
    total: u32,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while client.get::<crate::api::Ping>("/v1/ping").await.is_err() {
        if server.is_finished() || started.elapsed() > Duration::from_secs(20) {
            anyhow::bail!("the demo controller did not start");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let jobs = demo_jobs(total);
    crate::out!(
        "Submitting {} jobs that contend for {total} GPUs:",
        jobs.len()
    );
    for j in &jobs {
        let req = SubmitRequest {
            output: Some("%x-%j.out".to_string()),
            time_limit: j.time_limit,
            environment: std::env::vars()
                .filter(|(k, _)| k == crate::env_vars::PATH || k == crate::env_vars::HOME)
                .collect(),
            ..SubmitRequest::command(j.name, &j.command, dir, j.gpus)
        };
        let s: Submitted = client.post("/v1/jobs", &req).await?;
        let plural = if j.gpus == 1 { " " } else { "s" };
        crate::out!(
            "  job {:<2} {:<15} {} GPU{plural}  {}",
            s.job_id,
            j.name,
            j.gpus,
            j.what
        );
    }
    crate::out!();

    let t0 = Instant::now();
    let t0_ms = crate::clock::now_ms();
    let mut told = Told::default();
    let finished = loop {
        // Active first, then the history: a job that ends between the two is in both, and its
        // end is what counts.
        let active: Vec<JobView> = client.get("/v1/jobs").await?;
        let done = client.history(None, None, 1000).await?;
        let ended: std::collections::BTreeSet<u64> = done.iter().map(|j| j.id).collect();
        let seen = active
            .iter()
            .filter(|j| !ended.contains(&j.id))
            .chain(done.iter());
        for line in told.news(seen, t0_ms) {
            crate::out!("{line}");
        }
        if active.iter().all(|j| ended.contains(&j.id)) && done.len() == jobs.len() {
            break done;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            anyhow::bail!("the demo jobs did not finish within 2 minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    crate::out!();
    let ms = |t: &Option<String>| t.as_deref().and_then(crate::clock::parse_ms);
    let mut rows: Vec<(u64, Vec<String>)> = finished
        .iter()
        .map(|j| {
            let ran = match (ms(&j.start_time), ms(&j.end_time)) {
                (Some(s), Some(e)) => format!("{:.1}s", (e - s) as f64 / 1000.0),
                _ => "-".to_string(),
            };
            let cells = vec![
                j.id.to_string(),
                j.name.clone(),
                j.state.to_string(),
                exit_text(j.exit_code, j.signal),
                gpu_list(&j.gpus),
                ran,
            ];
            (j.id, cells)
        })
        .collect();
    rows.sort_by_key(|(id, _)| *id);
    let rows = rows.into_iter().map(|(_, r)| r).collect();
    crate::out!(
        "{}",
        table(
            &["JOB", "NAME", "STATE", "EXIT", "GPU INDEXES", "RAN"],
            rows
        )
    );
    crate::out!();
    match gpu_overlap(&finished) {
        None => crate::out!(
            "{} jobs ran on {total} GPUs in {:.1} s; no GPU was ever held by two jobs at once.",
            finished.len(),
            t0.elapsed().as_secs_f64()
        ),
        Some(msg) => anyhow::bail!("{msg}"),
    }
    Ok(())
}

/// Checks that no two jobs held the same GPU at overlapping times. `None` when none did.
pub fn gpu_overlap(jobs: &[JobView]) -> Option<String> {
    let ms = |t: &Option<String>| t.as_deref().and_then(crate::clock::parse_ms);
    let mut spans: Vec<(u32, i64, i64, u64)> = Vec::new();
    for j in jobs {
        if let (Some(s), Some(e)) = (ms(&j.start_time), ms(&j.end_time)) {
            spans.extend(j.gpus.iter().map(|g| (*g, s, e, j.id)));
        }
    }
    spans.sort();
    spans.windows(2).find_map(|w| {
        let ((g1, _, e1, j1), (g2, s2, _, j2)) = (w[0], w[1]);
        (g1 == g2 && s2 < e1).then(|| format!("GPU {g1} was held by jobs {j1} and {j2} at once"))
    })
}
