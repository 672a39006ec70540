//! `labpool notebook [OPTIONS]`: JupyterLab inside a job (from the job's environment, with its
//! GPUs, datasets and slice), opened in the browser through the dashboard. The job asks for
//! what the options ask (in the `interactive` partition when there is one and no other is
//! named); its script hosts the notebook (see [`crate::session::notebook_host`]). The command
//! waits until JupyterLab answers, then prints a one-time link that logs the member in to the
//! dashboard and lands on the notebook: its token never has to be copied. The notebook runs on
//! after the command returns, until the job's time limit, `labpool cancel`, or the idle rule.

use crate::api::sessions::{ForwardView, NOTEBOOK_TOKEN_VAR, notebook_base, notebook_port};
use crate::api::web::{LoginRequest, LoginUrl};
use crate::api::{CancelRequest, Submitted};
use crate::args::NotebookArgs;
use crate::client::Client;
use crate::render::print;
use crate::settings::Config;
use anyhow::Context;
use labpool_scheduler::JobState;
use serde::Serialize;
use std::time::{Duration, Instant};

/// How long JupyterLab may take to answer once its job runs.
const ANSWER_WITHIN: Duration = Duration::from_secs(180);

/// What `labpool notebook` prints (`--json`).
#[derive(Serialize)]
struct Opened {
    job_id: u64,
    node: String,
    gpus: Vec<u32>,
    /// The one-time link: it logs the browser in and opens the notebook.
    url: String,
    /// Seconds the link stays valid.
    expires_in_s: u64,
    /// The notebook's page once logged in.
    path: String,
}

/// Runs `labpool notebook`.
pub async fn notebook(args: &NotebookArgs, config: &Config) -> anyhow::Result<()> {
    let script = crate::api::session_script::notebook_command(config.jobs.interactive_idle);
    // Shown to JupyterLab by the dashboard's proxy, never to the member.
    let secret = (NOTEBOOK_TOKEN_VAR, crate::link_auth::random_hex(24));
    let req = super::run::session_request(&args.options, config, "notebook", script, secret)?;
    let client = Client::new(&config.controller.socket);
    let submitted: Submitted = client.post("/v1/jobs", &req).await?;
    let id = submitted.job_id;
    let cancel = || async {
        let _: Result<serde_json::Value, _> = client
            .post(
                "/v1/jobs/cancel",
                &CancelRequest {
                    ids: vec![id.to_string()],
                },
            )
            .await;
    };
    let job = tokio::select! {
        j = crate::session::attach::wait_started(&client, id) => j?,
        _ = tokio::signal::ctrl_c() => {
            cancel().await;
            anyhow::bail!("notebook {id} cancelled before it started");
        }
    };
    if job.state != JobState::Running {
        anyhow::bail!(
            "notebook {id} ended {} before JupyterLab started{}; `labpool logs {id}` or its output file says why",
            job.state,
            job.reason_detail
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        );
    }
    let port = job
        .ports
        .and_then(|p| notebook_port(p.first))
        .context("the job has no leased ports ([jobs] ports)")?;
    // JupyterLab answers on its port once it has started.
    let t0 = Instant::now();
    let view: ForwardView = loop {
        match client.get(&format!("/v1/jobs/{id}/forward/{port}")).await {
            Ok(v) => break v,
            Err(e) if t0.elapsed() > ANSWER_WITHIN => {
                anyhow::bail!(
                    "notebook {id} runs, but JupyterLab did not answer within {}: {e}\nhint: its output (`labpool show {id}` names the file) says why; the job keeps running until `labpool cancel {id}`",
                    labpool_units::format_duration(ANSWER_WITHIN)
                )
            }
            Err(_) => {}
        }
        let d: crate::controller::http::JobDetail = client.get(&format!("/v1/jobs/{id}")).await?;
        if d.job.state != JobState::Running {
            anyhow::bail!(
                "notebook {id} ended {} before JupyterLab answered; its output (`labpool show {id}` names the file) says why",
                d.job.state
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let path = format!("{}lab", notebook_base(id));
    let url: LoginUrl = client
        .post("/v1/web/login", &LoginRequest { next: Some(path.clone()) })
        .await
        .with_context(|| format!("notebook {id} runs, but no dashboard link could be made; `labpool cancel {id}` stops it"))?;
    let opened = Opened {
        job_id: id,
        node: view.node,
        gpus: job.gpus.clone(),
        url: url.url,
        expires_in_s: url.expires_in_s,
        path,
    };
    print(args.json, &opened, |o| {
        format!(
            "Notebook {} runs on {} with GPUs {}. Open it in a browser within {} (the link logs you in once):\n\n    {}\n\nLater, the dashboard's page for job {} has an Open button. It stops at its time limit, when idle, or with `labpool cancel {}`.",
            o.job_id,
            o.node,
            if o.gpus.is_empty() {
                "none".to_string()
            } else {
                crate::render::gpu_list(&o.gpus)
            },
            labpool_units::format_duration(Duration::from_secs(o.expires_in_s)),
            o.url,
            o.job_id,
            o.job_id
        )
    });
    Ok(())
}
