//! `labpool run [OPTIONS] --pty [COMMAND]` (and `srun --pty bash` outside a job): an
//! interactive session. The job asks for what the options ask (in the `interactive`
//! partition when there is one and no other is named), and its script hosts the session
//! (see [`crate::session`]).

use crate::args::{RunArgs, SubmitArgs};
use crate::client::Client;
use crate::settings::Config;
use anyhow::Context;
use std::collections::BTreeMap;

/// Runs `labpool run`; returns the shell's exit code.
pub async fn run(args: &RunArgs, config: &Config) -> anyhow::Result<i32> {
    if !args.pty {
        anyhow::bail!(
            "labpool run gives an interactive shell: add --pty (labpool run --pty bash)\nhint: to run a command in the background, use labpool submit --wrap \"CMD\""
        );
    }
    let uid = nix::unistd::geteuid().as_raw();
    let name = args
        .command
        .first()
        .and_then(|c| std::path::Path::new(c).file_name())
        .map_or_else(
            || "interactive".to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
    // A directory of the user's own, made before the job exists; a name of its own in it: two
    // pools (or two sessions) never meet on one socket.
    let (dir, passed_over) = crate::session::private_dir(uid)
        .context("cannot make a private directory for the session's socket in /tmp")?;
    if let Some(why) = &passed_over {
        eprintln!(
            "warning: {why}; this session uses {} instead (an admin can remove the other)",
            dir.display()
        );
    }
    let socket = dir.join(format!("{}.sock", crate::link_auth::random_hex(8)));
    let script = crate::session::host_command(&socket, config.jobs.interactive_idle, &args.command)
        .context("the command holds a NUL byte")?;
    // Shown by this client to reach the session from another machine (see session::conn).
    let token = crate::link_auth::random_hex(16);
    let secret = (crate::session::conn::TOKEN_VAR, token.clone());
    let req = session_request(&args.options, config, &name, script, secret)?;
    let client = Client::new(&config.controller.socket);
    let code = crate::session::attach::attach(&client, &req, &socket, &token).await;
    if passed_over.is_some() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    code
}

/// The request of an interactive job (a session, a notebook) running `script`: in the
/// `interactive` partition when there is one and the options name none, named `name` unless
/// they name it, with `secret` (variable, value) in its environment only, and never
/// preempted (a person works in it). The request's warnings are printed.
pub fn session_request(
    options: &labpool_scheduler::options::JobOptions,
    config: &Config,
    name: &str,
    script: String,
    secret: (&str, String),
) -> anyhow::Result<crate::api::SubmitRequest> {
    let mut options = options.clone();
    if options.partition.is_none() && config.partitions.iter().any(|p| p.name == "interactive") {
        options.partition = Some("interactive".into());
    }
    options.job_name.get_or_insert_with(|| name.to_string());
    let submit = SubmitArgs {
        options,
        wrap: Some(script),
        parsable: false,
        test_only: false,
        wait: false,
        json: false,
        script: None,
        stdin_script: None,
        args: Vec::new(),
    };
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    env.insert(secret.0.to_string(), secret.1);
    let (mut req, warnings, _) = super::submit::build_request(&submit, &cwd, &env)?;
    req.interactive = true;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(req)
}

/// Runs `labpool attach JOB` (`JOB.STEP` as `sattach` writes it): joins the running session
/// again; returns the shell's exit code, or 0 when this terminal detaches again.
pub async fn attach(job: &str, config: &Config) -> anyhow::Result<i32> {
    let id = job
        .split_once('.')
        .map_or(job, |(id, _)| id)
        .parse::<u64>()
        .map_err(|_| {
            anyhow::anyhow!(
                "'{job}' is not a job id\nhint: `labpool queue` lists your sessions; attach with the number in its first column"
            )
        })?;
    let client = Client::new(&config.controller.socket);
    crate::session::attach::attach_again(&client, id, false).await
}
