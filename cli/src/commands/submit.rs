//! `labpool submit`: reads the script's directives, layers the command line over them, and
//! queues the job with the submitter's environment.

use crate::api::{SubmitRequest, Submitted};
use crate::args::SubmitArgs;
use crate::client::Client;
use anyhow::Context;
use labpool_scheduler::script::{ClientFlags, ScriptError, parse_script};
use std::collections::BTreeMap;
use std::path::Path;

/// Scripts larger than this are refused: a job script is code, not data.
const MAX_SCRIPT_BYTES: u64 = 4 * 1024 * 1024;

/// Turns the command line into a request, reading the script; does not talk to the controller.
pub fn build_request(
    args: &SubmitArgs,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<(SubmitRequest, Vec<String>, ClientFlags)> {
    let (script, default_name) = match (&args.script, &args.wrap) {
        (_, Some(cmd)) => {
            if !args.args.is_empty() {
                anyhow::bail!(
                    "--wrap takes the whole command; arguments after it ({}) are not allowed\nhint: put them inside the quotes",
                    args.args.join(" ")
                );
            }
            (format!("#!/bin/sh\n{cmd}\n"), "wrap".to_string())
        }
        (Some(path), None) => {
            let full = cwd.join(path);
            let meta = std::fs::metadata(&full).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read script {}: {e}\nhint: check the path (relative to {}), or submit a command with --wrap \"CMD\"",
                    path.display(),
                    cwd.display()
                )
            })?;
            if !meta.is_file() {
                anyhow::bail!(
                    "{} is not a file\nhint: give the job script itself",
                    path.display()
                );
            }
            if meta.len() > MAX_SCRIPT_BYTES {
                anyhow::bail!(
                    "script {} is {} bytes; the limit is {MAX_SCRIPT_BYTES}",
                    path.display(),
                    meta.len()
                );
            }
            let text = std::fs::read_to_string(&full)
                .with_context(|| format!("cannot read script {}", path.display()))?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "script".into());
            (text, name)
        }
        // sbatch with no script reads it from standard input, and names the job "sbatch".
        (None, None) => match &args.stdin_script {
            Some(text) => (text.clone(), "sbatch".to_string()),
            None => anyhow::bail!("give a job script, or a command with --wrap \"CMD\""),
        },
    };
    let label = args
        .script
        .as_ref()
        .map_or_else(|| "--wrap".to_string(), |p| p.display().to_string());
    // Every problem of the script and the command line together, in one go.
    let (directives, mut problems) = match parse_script(&script) {
        Ok(d) => (d, Vec::new()),
        Err(ScriptError::Directives { problems, read }) => (
            *read,
            problems.iter().map(|p| format!("{label}: {p}")).collect(),
        ),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("in {label}"))),
    };
    let mut warnings: Vec<String> = directives
        .warnings
        .iter()
        .map(|w| format!("{label}: {w}"))
        .collect();
    let options = directives.options.overlay(args.options.clone());
    let begin_ms = match options.slurm.begin.as_deref() {
        Some(t) => crate::begin::parse_slurm_time("--begin", t, chrono::Local::now())
            .map_err(|e| problems.push(e.to_string()))
            .ok(),
        None => None,
    };
    let deadline_ms = match options.slurm.deadline.as_deref() {
        Some(t) => crate::begin::parse_slurm_time("--deadline", t, chrono::Local::now())
            .map_err(|e| problems.push(e.to_string()))
            .ok(),
        None => None,
    };
    let lines_failed = !problems.is_empty();
    let request = match options.resolve_all() {
        Ok(request) if !lines_failed => request,
        Ok(_) => return Err(refused(&problems)),
        Err(errors) => {
            // With lines left out, a per-GPU option may lack the GPUs a bad line asked for.
            let errors = errors
                .iter()
                .filter(|e| !(lines_failed && e.needs_other_lines()));
            problems.extend(errors.map(ToString::to_string));
            return Err(refused(&problems));
        }
    };
    warnings.extend(request.warnings.iter().cloned());

    let workdir = match &request.chdir {
        Some(dir) => cwd.join(dir),
        None => cwd.to_path_buf(),
    };
    if !workdir.is_dir() {
        anyhow::bail!(
            "working directory {} does not exist\nhint: create it, or fix --chdir",
            workdir.display()
        );
    }
    check_output_dirs(
        &workdir,
        &[
            ("--output", request.output.as_deref()),
            ("--error", request.error.as_deref()),
        ],
    )?;
    let req = SubmitRequest {
        name: request.name.clone().unwrap_or(default_name),
        script,
        args: args.args.clone(),
        workdir,
        output: request.output.clone(),
        error: request.error.clone(),
        gpus: request.gpus.count,
        gpu_type: request.gpus.gpu_type.clone(),
        cpus: request.cpus,
        mem_mib: request.mem_mib,
        time_limit: request.time_limit,
        partition: request.partition.clone(),
        environment: request.export.apply(env),
        umask: current_umask(),
        account: request.account.clone(),
        emergency: request.emergency,
        preemptible: request.preemptible,
        interactive: false,
        reservation: request.reservation.clone(),
        datasets: request.datasets.clone(),
        dependency: request.dependency.clone(),
        array: request.array.clone(),
        env: request.env.clone(),
        env_id: None,
        env_kind: None,
        models: request.models.clone(),
        model_uses: Vec::new(),
        gpu_share: request.gpu_share,
        slice: request.gpus.slice,
        no_requeue: request.no_requeue,
        wrapped: args.wrap.is_some(),
        signal: request.signal,
        open_append: request.open_append,
        get_user_env: request.get_user_env,
        nodes: request.nodes.clone(),
        hold: request.hold,
        mail_types: request.mail_types.clone(),
        mail_user: request.mail_user.clone(),
        begin_ms,
        deadline_ms,
        ntasks: request.ntasks,
        node_count: request.node_count,
        gpus_per_task: request.gpus_per_task,
        comment: request.comment.clone(),
        idempotency_key: Some(format!(
            "{:016x}{:016x}",
            crate::transport::random_u64(),
            crate::transport::random_u64()
        )),
    };
    Ok((req, warnings, directives.client))
}

/// The error for a submit with problems: one, as it is; several, as a numbered list.
fn refused(problems: &[String]) -> anyhow::Error {
    match problems {
        [one] => anyhow::anyhow!("{one}"),
        all => {
            let list: Vec<String> = all
                .iter()
                .enumerate()
                .map(|(i, p)| format!("  {}. {p}", i + 1))
                .collect();
            anyhow::anyhow!(
                "the job was not submitted; {} problems:\n{}\nhint: fix them all, then submit again",
                all.len(),
                list.join("\n")
            )
        }
    }
}

/// Refuses a job whose output could not be written: the directory of `--output` or `--error`
/// (the working directory when neither is given) must exist and be writable by the submitter,
/// who runs this check. Slurm accepts such a job and it fails with no trace; here the submit
/// says which directory and how to make it. A directory named by a `%` pattern is left to the
/// job's start.
fn check_output_dirs(workdir: &Path, outputs: &[(&str, Option<&str>)]) -> anyhow::Result<()> {
    use nix::unistd::{AccessFlags, access};
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let named: Vec<(&str, &str)> = outputs
        .iter()
        .filter_map(|(flag, p)| p.map(|p| (*flag, p)))
        .collect();
    let checks: Vec<(String, std::path::PathBuf)> = if named.is_empty() {
        vec![("the working directory".to_string(), workdir.to_path_buf())]
    } else {
        named
            .iter()
            // Output thrown away, as Slurm allows.
            .filter(|(_, pattern)| *pattern != "/dev/null")
            .filter_map(|(flag, pattern)| {
                let dir = workdir.join(pattern).parent()?.to_path_buf();
                (!dir.to_string_lossy().contains('%')).then(|| (format!("{flag} {pattern}"), dir))
            })
            .collect()
    };
    for (what, dir) in checks {
        if !seen.insert(dir.clone()) {
            continue;
        }
        if !dir.is_dir() {
            problems.push(format!(
                "{what}: the directory {} does not exist; create it first (mkdir -p {})",
                dir.display(),
                dir.display()
            ));
        } else if access(&dir, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
            problems.push(format!(
                "{what}: you may not write in {}; pick a directory of yours",
                dir.display()
            ));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "the job could not write its output: {}\nhint: labpool, like Slurm, does not create output directories",
        problems.join("; ")
    )
}

/// The script on standard input, as sbatch reads it when given no file (bounded as a script
/// file is). A terminal there means none was piped in.
fn script_from_stdin() -> anyhow::Result<String> {
    use std::io::{IsTerminal, Read};
    let stdin = std::io::stdin();
    anyhow::ensure!(
        !stdin.is_terminal(),
        "give a job script, pipe one in (sbatch < job.sh), or give a command with --wrap \"CMD\""
    );
    let mut text = String::new();
    stdin
        .lock()
        .take(MAX_SCRIPT_BYTES + 1)
        .read_to_string(&mut text)
        .context("cannot read the script from standard input")?;
    anyhow::ensure!(
        text.len() as u64 <= MAX_SCRIPT_BYTES,
        "the script on standard input is over {MAX_SCRIPT_BYTES} bytes, the limit"
    );
    anyhow::ensure!(
        !text.trim().is_empty(),
        "standard input held no script: give a job script, or a command with --wrap \"CMD\""
    );
    Ok(text)
}

/// This process's umask.
fn current_umask() -> u32 {
    use nix::sys::stat::{Mode, umask};
    let old = umask(Mode::from_bits_truncate(0o022));
    umask(old);
    old.bits()
}

/// How long a submit whose answer was lost keeps trying for the controller to come back.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(120);

/// Posts the submit. When the answer is lost (the connection closed mid-way, the controller
/// stopping), the controller may have queued the job: the same request, with the same
/// idempotency key, is sent again until it answers, and gets the first answer if it had. A
/// controller that is simply not running fails at once, as before.
pub async fn post_with_retries(client: &Client, req: &SubmitRequest) -> anyhow::Result<Submitted> {
    use crate::client::ClientError;
    use backon::Retryable;
    let mut lost = false;
    let mut told = false;
    let every = std::time::Duration::from_millis(200);
    let answer = (|| client.post::<_, Submitted>("/v1/jobs", req))
        .retry(crate::retry::backoff_within(
            every,
            std::time::Duration::from_secs(2),
            RETRY_FOR,
        ))
        .when(|e| {
            lost |= matches!(
                e,
                ClientError::Http(_) | ClientError::Api { status: 503, .. }
            );
            lost && matches!(
                e,
                ClientError::Http(_) | ClientError::Api { status: 503, .. } | ClientError::Connect { .. }
            )
        })
        .notify(|e, _| {
            if !std::mem::replace(&mut told, true) {
                eprintln!(
                    "labpool: the controller did not answer ({}); trying again with the same submit id until it is back (up to {}), so the job is not queued twice",
                    e.to_string().lines().next().unwrap_or_default(),
                    labpool_units::format_duration(RETRY_FOR)
                );
            }
        })
        .await?;
    if told {
        eprintln!("labpool: the controller answered");
    }
    Ok(answer)
}

/// Whose words a submit answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `labpool submit`'s.
    Labpool,
    /// sbatch's: `Submitted batch job N`, and `--test-only`'s line on standard error.
    Sbatch,
}

/// Submits, answering in `style`'s words.
pub async fn submit_as(args: &SubmitArgs, client: Client, style: Style) -> anyhow::Result<()> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let stdin_script = if style == Style::Sbatch && args.script.is_none() && args.wrap.is_none() {
        Some(script_from_stdin()?)
    } else {
        None
    };
    let args = &SubmitArgs {
        stdin_script,
        ..args.clone()
    };
    let (req, warnings, flags) = build_request(args, &cwd, &env)?;
    // sbatch writes its warnings as it writes its errors: `sbatch: warning: …`.
    let prefix = match style {
        Style::Labpool => "",
        Style::Sbatch => "sbatch: ",
    };
    for w in warnings {
        eprintln!("{prefix}warning: {w}");
    }
    // `#SBATCH --parsable`, `--wait` and `--test-only` count as on the command line.
    let (parsable, wait, test_only) = (
        args.parsable || flags.parsable,
        args.wait || flags.wait,
        args.test_only || flags.test_only,
    );
    if test_only {
        return super::test_only::test_only(&client, &req, args.json, style).await;
    }
    let submitted = post_with_retries(&client, &req).await?;
    for w in &submitted.warnings {
        eprintln!("{prefix}warning: {w}");
    }
    let n = submitted.job_ids.len();
    if parsable {
        crate::out!("{}", submitted.job_id);
    } else if style == Style::Sbatch {
        crate::out!("Submitted batch job {}", submitted.job_id);
    } else if n > 1 {
        crate::out!(
            "Submitted array job {} ({n} tasks, job ids {}-{})",
            submitted.job_id,
            submitted.job_ids[0],
            submitted.job_ids[n - 1]
        );
    } else {
        crate::out!("Submitted job {}", submitted.job_id);
    }
    if wait {
        let code = super::submit_wait::wait(&client, &submitted).await?;
        if code != 0 {
            std::process::exit(code);
        }
    }
    Ok(())
}
