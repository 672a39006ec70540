//! `sattach JOBID[.STEPID]`: joins a running interactive session again (one started by
//! `srun --pty`, `salloc` or `labpool run --pty`), as `labpool attach` does. A session is one
//! task on one node, so the task filters take task 0 only, and `--layout` prints that one task.

use crate::api::sessions::SessionView;
use crate::client::Client;
use crate::controller::http::JobDetail;

/// sattach's options.
#[derive(clap::Parser, Debug)]
#[command(name = "sattach", no_binary_name = true, infer_long_args = true)]
pub struct SattachArgs {
    /// Send standard input to this task only: a session has task 0 alone
    #[arg(long = "input-filter", value_name = "TASKID")]
    input_filter: Option<String>,
    /// Print this task's standard output only: a session has task 0 alone
    #[arg(long = "output-filter", value_name = "TASKID")]
    output_filter: Option<String>,
    /// Print this task's standard error only: a session has task 0 alone
    #[arg(long = "error-filter", value_name = "TASKID")]
    error_filter: Option<String>,
    /// a session's terminal is shown as it is, without task numbers
    #[arg(short = 'l', long = "label")]
    label: bool,
    /// Print the step's task layout and exit, without attaching
    #[arg(long = "layout")]
    layout: bool,
    /// Leave out the line that says which job and node the session runs on
    #[arg(short = 'Q', long = "quiet")]
    quiet: bool,
    /// the session says what it does already
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    /// The job, and optionally its step (12 or 12.0)
    #[arg(value_name = "JOBID.STEPID")]
    job: String,
}

/// Runs sattach; returns the session's exit code (0 when this terminal detaches).
pub async fn sattach(c: &Client, a: &SattachArgs) -> anyhow::Result<i32> {
    let mut problems = Vec::new();
    for (name, f) in [
        ("--input-filter", &a.input_filter),
        ("--output-filter", &a.output_filter),
        ("--error-filter", &a.error_filter),
    ] {
        if let Some(t) = f
            && t.trim() != "0"
        {
            problems.push(format!(
                "{name}={t}: a session has one task, task 0; use {name}=0 or leave it out"
            ));
        }
    }
    let id = a
        .job
        .split_once('.')
        .map_or(a.job.as_str(), |(id, _)| id)
        .parse::<u64>();
    if id.is_err() {
        problems.push(format!(
            "'{}' is not JOBID or JOBID.STEPID; `squeue --me` lists your jobs",
            a.job
        ));
    }
    if !problems.is_empty() {
        anyhow::bail!("{}", problems.join("\n"));
    }
    let id = id.expect("checked");
    if a.label {
        eprintln!(
            "sattach: warning: --label ignored: a session's terminal is shown as it is, without task numbers"
        );
    }
    if a.verbose > 0 {
        eprintln!("sattach: warning: --verbose ignored: the session says what it does already");
    }
    if a.layout {
        let view: SessionView = c.get(&format!("/v1/jobs/{id}/session")).await?;
        let d: JobDetail = c.get(&format!("/v1/jobs/{}", view.job_id)).await?;
        let node = d.job.node.unwrap_or_default();
        crate::out!(
            "Job step layout:\n\t1 tasks, 1 nodes ({node})\n\n\tNode 0 ({node}), 1 task(s): 0"
        );
        return Ok(0);
    }
    crate::session::attach::attach_again(c, id, a.quiet).await
}
