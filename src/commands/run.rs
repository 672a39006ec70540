//! `labpool run [OPTIONS] --pty [COMMAND]` (and `srun --pty bash` outside a job): an
//! interactive session. The job asks for what the options ask (in the `interactive`
//! partition when there is one and no other is named), and its script hosts the session
//! (see [`crate::session`]).

use crate::cli::{RunArgs, SubmitArgs};
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
    let mut options = args.options.clone();
    if options.partition.is_none() && config.partitions.iter().any(|p| p.name == "interactive") {
        options.partition = Some("interactive".into());
    }
    if options.job_name.is_none() {
        let name = args
            .command
            .first()
            .and_then(|c| std::path::Path::new(c).file_name())
            .map_or_else(
                || "interactive".to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
        options.job_name = Some(name);
    }
    let quoted: Vec<String> = args
        .command
        .iter()
        .map(|w| shlex::try_quote(w).map(|q| q.into_owned()))
        .collect::<Result<_, _>>()
        .context("the command holds a NUL byte")?;
    // A name of its own: two pools (or two sessions) never meet on one socket.
    let socket = crate::session::socket_dir(uid)
        .join(format!("{:016x}.sock", crate::transport::random_u64()));
    let script = format!(
        "exec labpool session-host --socket {} --idle {}s -- {}",
        socket.display(),
        config.jobs.interactive_idle.as_secs().max(1),
        quoted.join(" ")
    );
    let submit = SubmitArgs {
        options,
        wrap: Some(script),
        parsable: false,
        test_only: false,
        wait: false,
        json: false,
        script: None,
        args: Vec::new(),
    };
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    // Shown by this client to reach the session from another machine (see session::conn).
    let token = format!(
        "{:016x}{:016x}",
        crate::transport::random_u64(),
        crate::transport::random_u64()
    );
    env.insert(crate::session::conn::TOKEN_VAR.into(), token.clone());
    let (mut req, warnings) = super::submit::build_request(&submit, &cwd, &env)?;
    // A person types in it: it is never preempted.
    req.interactive = true;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let client = Client::new(&config.controller.socket);
    crate::session::attach::attach(&client, &req, &socket, &token).await
}
