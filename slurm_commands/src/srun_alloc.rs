//! `srun CMD` outside a job, as Slurm's: an allocation made for one step. The job asks for what
//! srun's options ask (those `sbatch` reads: `-n`, `-G`, `-t`, `-p`, …); its script runs the
//! same `srun` inside it, so the step is what it would be in a batch job. The tasks' output
//! comes back on this srun's own standard output and error as it is written, and srun exits
//! with the step's code; interrupted, it cancels the job.

use crate::api::{CancelRequest, JobView, SubmitRequest};
use crate::client::Client;
use crate::controller::http::JobDetail;
use labpool_scheduler::JobState;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// srun's options that shape the step only; the job is not asked for them.
const STEP_ONLY: &[&str] = &[
    "o",
    "output",
    "e",
    "error",
    "i",
    "input",
    "open-mode",
    "l",
    "label",
    "u",
    "unbuffered",
];

/// Runs `srun ARGS` with no job around it; the step's exit code.
pub fn run(args: &[String]) -> Result<i32, String> {
    let parsed = super::args::parse_srun(args)?;
    let job_args = job_options(args, parsed.command.len());
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    // A directory of its own, made here (it fails if the name is taken), so that no one can
    // have planted a link where the job will write.
    let dir = output_dir(&cwd)?.join(format!(".labpool-srun-{}", crate::link_auth::random_hex(8)));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot make {} for the step's output: {e}", dir.display()))?;
    let (out, err) = (dir.join("out"), dir.join("err"));
    let code = submit_and_follow(args, &parsed, job_args, &cwd, &out, &err);
    let _ = std::fs::remove_dir_all(&dir);
    code
}

/// Queues the job whose script runs `srun ARGS`, with its output in `out` and `err`, and
/// follows it to its end.
fn submit_and_follow(
    args: &[String],
    parsed: &super::args::SrunArgs,
    job_args: Vec<String>,
    cwd: &Path,
    out: &Path,
    err: &Path,
) -> Result<i32, String> {
    let words: Vec<String> = std::iter::once("srun".to_string())
        .chain(args.iter().cloned())
        .collect();
    let line = shlex::try_join(words.iter().map(String::as_str))
        .map_err(|_| "the command holds a NUL byte".to_string())?;
    // sbatch's parser takes no program name.
    let mut submit_words = job_args;
    submit_words.extend([
        "-o".into(),
        out.display().to_string(),
        "-e".into(),
        err.display().to_string(),
        "--wrap".into(),
        format!("exec {line}"),
    ]);
    let submit = <super::Sbatch as clap::Parser>::try_parse_from(&submit_words)
        .map_err(|e| e.to_string())?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let (mut req, warnings, _) = crate::commands::submit::build_request(&submit.args, cwd, &env)
        .map_err(|e| format!("{e:#}"))?;
    // Named after its command, as Slurm names it, unless -J named it.
    if submit.args.options.job_name.is_none() {
        req.name = parsed
            .command
            .first()
            .and_then(|c| Path::new(c).file_name())
            .map_or_else(|| "srun".into(), |n| n.to_string_lossy().into_owned());
    }
    for w in warnings {
        eprintln!("srun: warning: {w}");
    }
    let socket = super::socket().map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let client = Client::new(&socket);
    rt.block_on(follow(&client, &req, out, err))
}

/// Whether a srun option (its name, without dashes) shapes the step only: one of
/// [`STEP_ONLY`], or an abbreviation of one (`--out`), as getopt reads it.
fn step_only(name: &str, long: bool) -> bool {
    STEP_ONLY.contains(&name)
        || (long && name.len() >= 3 && STEP_ONLY.iter().any(|o| o.len() > 1 && o.starts_with(name)))
}

/// Where the step's output is kept while srun relays it: the working directory, which the
/// job's node sees too (a home or shared directory on a pool of several nodes); where the
/// caller may not write, a private directory in `/tmp` (seen by a job on this machine).
fn output_dir(cwd: &Path) -> Result<std::path::PathBuf, String> {
    use nix::unistd::{AccessFlags, access};
    if access(cwd, AccessFlags::W_OK | AccessFlags::X_OK).is_ok() {
        return Ok(cwd.to_path_buf());
    }
    let uid = nix::unistd::geteuid().as_raw();
    crate::session::private_dir(uid)
        .map(|(d, _)| d)
        .map_err(|e| format!("cannot make a private directory for the step's output: {e}"))
}

/// The options of `args` (before the command's `len` words) that `sbatch` reads, as words.
fn job_options(args: &[String], command_len: usize) -> Vec<String> {
    let options = &args[..args.len() - command_len];
    let mut kept = Vec::new();
    let mut i = 0;
    while i < options.len() {
        // One option: its word, and its value's word when `sbatch` takes it apart.
        let word = &options[i];
        let name = word
            .trim_start_matches('-')
            .split('=')
            .next()
            .unwrap_or_default();
        let long = word.starts_with("--");
        let name: String = if long {
            name.to_string()
        } else {
            name.chars().take(1).collect()
        };
        let alone = vec![word.clone(), "--wrap".into(), "true".into()];
        let with_next = options
            .get(i + 1)
            .map(|next| vec![word.clone(), next.clone()]);
        let step_only = step_only(&name, long) || word == "--";
        if !step_only && <super::Sbatch as clap::Parser>::try_parse_from(&alone).is_ok() {
            kept.push(word.clone());
            i += 1;
        } else if let Some(pair) = with_next.filter(|_| !step_only).filter(|p| {
            let mut p = p.clone();
            p.extend(["--wrap".into(), "true".into()]);
            <super::Sbatch as clap::Parser>::try_parse_from(&p).is_ok()
        }) {
            kept.extend(pair);
            i += 2;
        } else {
            // srun's own, or a value of one: the step inside reads it.
            i += 1;
        }
    }
    kept
}

/// Submits `req`, relays the step's output while the job runs, and returns its exit code. An
/// interrupt (INT, TERM, HUP) from the moment it starts cancels the job; so does losing the
/// controller for good, so that no job holds GPUs with no one reading its output.
async fn follow(
    client: &Client,
    req: &SubmitRequest,
    out: &Path,
    err: &Path,
) -> Result<i32, String> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for kind in [
        tokio::signal::unix::SignalKind::interrupt(),
        tokio::signal::unix::SignalKind::terminate(),
        tokio::signal::unix::SignalKind::hangup(),
    ] {
        let flag = interrupted.clone();
        let mut stream = tokio::signal::unix::signal(kind).map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                flag.store(true, Ordering::SeqCst);
            }
        });
    }
    let submitted = crate::commands::submit::post_with_retries(client, req)
        .await
        .map_err(|e| format!("{e:#}"))?;
    let id = submitted.job_id;
    let cancel = || async move {
        let _: Result<serde_json::Value, _> = client
            .post(
                "/v1/jobs/cancel",
                &CancelRequest {
                    ids: vec![id.to_string()],
                },
            )
            .await;
    };
    let (mut out_at, mut err_at) = (0u64, 0u64);
    let (mut said_waiting, mut failures) = (false, 0u32);
    loop {
        let job: JobView = match client.get::<JobDetail>(&format!("/v1/jobs/{id}")).await {
            Ok(detail) => {
                failures = 0;
                detail.job
            }
            // A controller restarting: try again for ten seconds, then give the job up.
            Err(e) if failures < 40 => {
                failures += 1;
                if failures == 1 {
                    eprintln!("srun: warning: job {id}: {e}; trying again");
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            Err(e) => {
                cancel().await;
                return Err(format!("lost job {id} ({e}); it was cancelled"));
            }
        };
        let ended = job.state.is_finished();
        // Once it ended, everything it wrote; while it runs, what came so far.
        while relay(out, &mut out_at, &mut std::io::stdout())
            + relay(err, &mut err_at, &mut std::io::stderr())
            > 0
            && ended
        {}
        if ended {
            return Ok(match (job.state, job.exit_code) {
                (JobState::Completed, _) => 0,
                (_, Some(code)) if code != 0 => code,
                _ => {
                    eprintln!(
                        "srun: error: job {id} ended {}{}",
                        job.state,
                        job.reason_detail
                            .as_deref()
                            .map_or_else(String::new, |d| format!(": {d}"))
                    );
                    1
                }
            });
        }
        if job.state == JobState::Pending && !said_waiting {
            eprintln!("srun: job {id} queued and waiting for resources");
            said_waiting = true;
        }
        if interrupted.swap(false, Ordering::SeqCst) {
            eprintln!("srun: interrupted: cancelling job {id}");
            cancel().await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Copies what `path` gained since `at` to `to`, at most 1 MiB at a time; how many bytes.
fn relay(path: &Path, at: &mut u64, to: &mut dyn Write) -> usize {
    let Ok(mut f) = std::fs::File::open(path) else {
        return 0;
    };
    if f.seek(SeekFrom::Start(*at)).is_err() {
        return 0;
    }
    let mut buf = Vec::new();
    match f.take(1 << 20).read_to_end(&mut buf) {
        Ok(n) => {
            *at += n as u64;
            let _ = to.write_all(&buf);
            let _ = to.flush();
            n
        }
        Err(_) => 0,
    }
}
