//! `labpool shim DIR`: one per job attempt, like slurmstepd. It owns the job's process group,
//! runs the script as its user, enforces the time limit (TERM, grace, KILL), and writes the end
//! status to `DIR/status.json`, so the end is never lost while the agent or controller is down.
//!
//! It holds `DIR/lock` for its whole life; that lock is how a restarted agent tells a live job
//! from a dead one (see [`crate::jobdir`]). It uses plain threads, not an async runtime,
//! so that it can switch its effective uid safely while still single-threaded.

use crate::api::agent::Outcome;
use crate::clock::now_ms;
use crate::jobdir::{JobDir, RESERVED_RECORDS, Started};
use crate::procs::kill_job_processes;
use labpool_isolation::{Identity, JobCgroups, JobIsolation, Sandbox};
use labpool_scheduler::JobState;
use labpool_scheduler::options::SignalSpec;
use nix::sys::signal::SigSet;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the shim runs; the agent writes it to `DIR/spec.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShimSpec {
    /// Job id.
    pub job: u64,
    /// Attempt.
    pub attempt: u32,
    /// User to run as.
    pub user: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// All its groups.
    pub groups: Vec<u32>,
    /// The program (the job's script).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Standard output file.
    pub stdout: PathBuf,
    /// Standard error file.
    pub stderr: PathBuf,
    /// The whole environment.
    pub env: BTreeMap<String, String>,
    /// Time limit, seconds.
    pub time_limit_s: Option<u64>,
    /// Milliseconds between TERM and KILL.
    pub kill_grace_ms: u64,
    /// umask for the job.
    pub umask: u32,
    /// The cgroups to run the job in, where the node has them.
    #[serde(default)]
    pub isolation: Option<JobIsolation>,
    /// A signal to send before the time limit (`--signal`).
    #[serde(default)]
    pub signal: Option<SignalSpec>,
    /// Append to the output files rather than truncate them (`--open-mode=append`).
    #[serde(default)]
    pub open_append: bool,
    /// `--get-user-env`: lay `env` over the user's login environment, read with this many
    /// seconds for the login shell.
    #[serde(default)]
    pub login_env_s: Option<u32>,
}

enum Event {
    Exited,
    Signal(Signal),
}

/// Runs the shim for the attempt in `dir`. Returns when the job has ended and its status is
/// written, or at once when the attempt is fenced or already ended.
pub fn run(dir: &Path) -> anyhow::Result<()> {
    // A session of its own, first: the shim (and the job) outlive the agent or controller that
    // started it, and its terminal. (The agent spawns it with nothing run before exec.)
    let _ = nix::unistd::setsid();
    // Block the stop signals before anything else, so that a cancel that arrives early is
    // queued rather than killing the shim; the signal thread below takes them.
    let mut stop = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        stop.add(s);
    }
    stop.thread_block()?;

    let (job, attempt) = parse_dir_name(dir)?;
    // Out of the daemon's cgroup, so that a supervisor stopping the daemon's whole cgroup
    // (systemd's default for a restart) leaves the job running.
    for (group, moved) in labpool_isolation::leave_service_cgroup(&format!("{job}.{attempt}")) {
        if let Err(e) = moved {
            log(&format!(
                "stays in the daemon's cgroup ({}: {e}); a supervisor that stops the daemon's whole cgroup would stop this job",
                group.display()
            ));
        }
    }
    let spool = dir
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow::anyhow!("{} is not a spool job dir", dir.display()))?;
    let jd = JobDir::new(spool, job, attempt);
    let _lock = jd.lock()?;
    if jd.is_fenced() {
        log(&format!(
            "attempt {job}.{attempt} is fenced; not starting it"
        ));
        return Ok(());
    }
    if jd.status().is_some() {
        log("status already recorded; nothing to do");
        return Ok(());
    }
    let spec: ShimSpec = serde_json::from_slice(&std::fs::read(jd.spec_path())?)?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(spec.umask));

    let (stdout, stderr) = match open_outputs(&spec) {
        Ok(files) => files,
        Err(message) => return finish(&jd, failed_to_start(message)),
    };
    // A node that isolates jobs never runs one without it.
    let groups = match spec.isolation.as_ref().map(JobCgroups::create).transpose() {
        Ok(groups) => groups,
        Err(e) => {
            let message = format!(
                "could not isolate the job ({e}); it was not started. Ask an admin to check the node's cgroups, or set [jobs] isolation = \"off\""
            );
            return finish(&jd, failed_to_start(message));
        }
    };
    // Room for the start and end records, set aside before the script can run: on a spool
    // that is full, the job does not start rather than run without a record of it.
    if let Err(e) = jd.reserve(&RESERVED_RECORDS) {
        let message = format!(
            "could not set aside room in the job's spool {} ({e}); the job was not started. Free space there (`df {}`)",
            jd.path().display(),
            jd.path().display()
        );
        // One try: on a full spool this status may not land either, and then the agent reads
        // the attempt as never started, which is the truth.
        jd.write_reserved("status.json", &failed_to_start(message))?;
        return Ok(());
    }
    let mut child = match spawn(&spec, stdout, stderr, groups.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            let message = format!(
                "could not start {} as {} in {}: {e}",
                spec.program.display(),
                spec.user,
                spec.workdir.display()
            );
            return finish(&jd, failed_to_start(message));
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    log(&format!(
        "job {job}.{attempt} started as pid {pid} (user {})",
        spec.user
    ));
    // From here on the script runs: every way out, errors included, must stop all of its
    // processes and record an end, or its GPUs would be handed out while it still uses them.
    let result = supervise(&jd, &spec, pid, stop);
    let (forced, reason) = match result {
        Ok(stopped) => stopped,
        Err(e) => {
            log(&format!("supervision failed: {e:#}; killing the job"));
            (
                Some(JobState::Failed),
                Some(format!("labpool's shim failed: {e:#}")),
            )
        }
    };
    // The script is gone; anything it left behind goes too (no zombie jobs): its process group,
    // then any process that still carries the job's identity, such as one that called setsid.
    let _ = killpg(pid, Signal::SIGKILL);
    let mut strays = kill_job_processes(&jd.key());
    for p in groups.as_ref().map(JobCgroups::pids).unwrap_or_default() {
        if p != pid.as_raw() && kill(Pid::from_raw(p), Signal::SIGKILL).is_ok() {
            strays += 1;
        }
    }
    if strays > 0 {
        log(&format!("killed {strays} leftover process(es) of the job"));
    }
    let reaped = waitpid(pid, None).unwrap_or(WaitStatus::StillAlive);
    let _ = child.try_wait();
    let (exit_code, signal) = match reaped {
        WaitStatus::Exited(_, code) => (Some(code), None),
        WaitStatus::Signaled(_, sig, _) => (None, Some(sig as i32)),
        _ => (None, None),
    };
    let oom = groups.as_ref().and_then(JobCgroups::oom_killed);
    drop(groups);
    let state = match (forced, exit_code, oom) {
        (Some(state), _, _) => state,
        (None, _, Some(_)) => JobState::OutOfMemory,
        (None, Some(0), None) => JobState::Completed,
        _ => JobState::Failed,
    };
    let reason = match (forced, oom) {
        (None, Some(peak)) => Some(format!(
            "the job used more memory than its limit of {} (--mem; peak {}), and the kernel killed it; ask for more with --mem",
            labpool_units::format_size(
                spec.isolation
                    .as_ref()
                    .and_then(|i| i.mem_bytes)
                    .unwrap_or(0)
            ),
            labpool_units::format_size(peak)
        )),
        _ => reason,
    };
    let reason = reason.or_else(|| signal.map(|s| format!("killed by signal {s}")));
    finish(
        &jd,
        Outcome {
            state,
            exit_code,
            signal,
            end_time_ms: now_ms(),
            reason,
        },
    )
}

/// Watches the running script until it exits: enforces the time limit and stops it on a
/// cancel. Returns the state to report when labpool stopped it, with the reason. The script
/// is left as a zombie (not reaped), so that its pid and process group cannot be reused yet.
fn supervise(
    jd: &JobDir,
    spec: &ShimSpec,
    pid: Pid,
    stop: SigSet,
) -> anyhow::Result<(Option<JobState>, Option<String>)> {
    let started = Instant::now();
    let record = Started {
        shim_pid: std::process::id() as i32,
        pgid: pid.as_raw(),
        start_time_ms: now_ms(),
    };
    // The script runs whether or not this lands; the room set aside already says it may have.
    if let Err(e) = jd.write_reserved("started.json", &record) {
        log(&format!("cannot record the start: {e}; the job runs on"));
    }
    let (tx, rx) = mpsc::channel();
    let waiter = tx.clone();
    std::thread::Builder::new()
        .name("wait".into())
        .spawn(move || {
            // WNOWAIT: see the exit but leave the zombie for the caller to reap.
            while let Err(nix::errno::Errno::EINTR) =
                waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
            {}
            let _ = waiter.send(Event::Exited);
        })?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(sig) = stop.wait() {
                if tx.send(Event::Signal(sig)).is_err() {
                    break;
                }
            }
        })?;

    let grace = Duration::from_millis(spec.kill_grace_ms);
    let limit = spec.time_limit_s.map(|s| started + Duration::from_secs(s));
    // `--signal`: when to warn the job, until it has been warned.
    let mut warn_at = spec
        .time_limit_s
        .zip(spec.signal)
        .map(|(l, s)| (started + warning_after(l, s.before_s), s));
    // (state to report, when to send KILL) once the job is being stopped.
    let mut stopping: Option<(JobState, Instant)> = None;
    let mut reason: Option<String> = None;
    loop {
        let deadline = match (stopping, warn_at) {
            (Some((_, kill_at)), _) => Some(kill_at),
            (None, Some((at, _))) => Some(at),
            (None, None) => limit,
        };
        let event = match deadline {
            Some(d) => match rx.recv_timeout(d.saturating_duration_since(Instant::now())) {
                Ok(ev) => Some(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    anyhow::bail!("the shim's threads stopped")
                }
            },
            None => Some(rx.recv()?),
        };
        match (event, stopping) {
            (Some(Event::Exited), _) => return Ok((stopping.map(|(state, _)| state), reason)),
            (Some(Event::Signal(sig)), None) => {
                log(&format!("{sig} received: cancelling job"));
                let _ = killpg(pid, Signal::SIGTERM);
                stopping = Some((JobState::Cancelled, Instant::now() + grace));
                reason = Some("cancelled".to_string());
            }
            (Some(Event::Signal(_)), Some(_)) => {}
            (None, None) if warn_at.is_some() => {
                if let Some((_, s)) = warn_at.take() {
                    warn(jd, pid, s);
                }
            }
            (None, None) => {
                log("time limit reached: sending TERM");
                let _ = killpg(pid, Signal::SIGTERM);
                stopping = Some((JobState::Timeout, Instant::now() + grace));
                let limit = labpool_units::format_elapsed(spec.time_limit_s.unwrap_or(0));
                reason = Some(format!("time limit of {limit} reached"));
            }
            (None, Some((state, _))) => {
                log("grace period over: sending KILL");
                let _ = killpg(pid, Signal::SIGKILL);
                let _ = kill_job_processes(&jd.key());
                stopping = Some((state, Instant::now() + Duration::from_secs(3600)));
            }
        }
    }
}

/// The longest a job waits for a `--signal` whose lead time is as long as its limit or longer:
/// Slurm's controller checks time limits every 30 s, so there such a warning comes 0 to 30 s
/// after the start, never at it, when the program has had no time to set its handler.
const EARLIEST_WARNING_S: u64 = 15;

/// How long after the start a job with a `time_limit_s` gets a `--signal` sent `before_s`
/// before it: at the lead time asked for, but not sooner than [`EARLIEST_WARNING_S`] after the
/// start (or half the limit, for a shorter one), which sbatch(1) allows ("may be sent up to
/// 60 seconds earlier than specified", so also later than the start).
fn warning_after(time_limit_s: u64, before_s: u32) -> Duration {
    let asked = time_limit_s.saturating_sub(before_s.into());
    let floor = EARLIEST_WARNING_S.min(time_limit_s / 2);
    Duration::from_secs(asked.max(floor))
}

/// Sends a job its `--signal` before the time limit: to the batch shell alone with `B:`, else
/// to its steps' tasks (see [`crate::procs::signal_step_tasks`]).
fn warn(jd: &JobDir, shell: Pid, s: SignalSpec) {
    let Ok(signal) = Signal::try_from(s.signal) else {
        log(&format!(
            "--signal {} is not a signal here; not sent",
            s.signal
        ));
        return;
    };
    let sent = if s.batch_only {
        usize::from(kill(shell, signal).is_ok())
    } else {
        crate::procs::signal_step_tasks(&jd.key(), signal, shell)
    };
    log(&format!(
        "{signal} sent to {sent} process(es), {} s before the time limit (--signal)",
        s.before_s
    ));
}

/// How long the shim keeps trying to record a job's end that it cannot write.
const KEEP_STATUS_FOR: Duration = Duration::from_secs(3600);

/// Records the end. A status that cannot be written (a spool that went bad despite the room
/// set aside) is kept by the shim, still holding the lock so the agent sees the job as
/// running, and written again every second until it lands.
fn finish(jd: &JobDir, outcome: Outcome) -> anyhow::Result<()> {
    log(&format!(
        "job ended: {} exit={:?} signal={:?} {}",
        outcome.state,
        outcome.exit_code,
        outcome.signal,
        outcome.reason.as_deref().unwrap_or("")
    ));
    let started = Instant::now();
    let mut told = false;
    loop {
        match jd.write_reserved("status.json", &outcome) {
            Ok(()) => return Ok(()),
            Err(e) if started.elapsed() < KEEP_STATUS_FOR => {
                if !std::mem::replace(&mut told, true) {
                    log(&format!(
                        "cannot record the end in {} ({e}); trying again every second",
                        jd.path().display()
                    ));
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn failed_to_start(message: String) -> Outcome {
    log(&message);
    Outcome {
        state: JobState::Failed,
        exit_code: None,
        signal: None,
        end_time_ms: now_ms(),
        reason: Some(message),
    }
}

/// A line in the shim's log (its standard error). A log on a full disk loses the line; it
/// never stops the shim (`eprintln!` would panic).
fn log(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "{} labpool-shim[{}]: {message}",
        chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.3f"),
        std::process::id()
    );
}

fn parse_dir_name(dir: &Path) -> anyhow::Result<(u64, u32)> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let parsed = name
        .split_once('.')
        .and_then(|(j, a)| Some((j.parse().ok()?, a.parse().ok()?)));
    parsed.ok_or_else(|| {
        anyhow::anyhow!(
            "{} is not a job attempt directory (JOB.ATTEMPT)",
            dir.display()
        )
    })
}

/// The job's user, as the sandbox takes it.
fn identity(spec: &ShimSpec) -> Identity {
    Identity {
        uid: spec.uid,
        gid: spec.gid,
        groups: spec.groups.clone(),
    }
}

/// How long a job's start waits for the directory of its output files. A library that names
/// the log directory after the job id (submitit's `%j` folder) makes it just after `sbatch`
/// returns; on Slurm that is always before the start, here a job may start within a
/// millisecond. A job whose directory exists loses no time.
const WAIT_FOR_OUTPUT_DIR: Duration = Duration::from_secs(10);

/// Opens the output files with the job user's rights, so that a job can write only where its
/// user may (waiting up to [`WAIT_FOR_OUTPUT_DIR`] for their directory). The shim is still
/// single-threaded here, which makes switching the effective uid safe.
fn open_outputs(spec: &ShimSpec) -> Result<(File, File), String> {
    identity(spec).as_effective(|| {
        let open = |path: &Path| {
            let try_open = || {
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .append(spec.open_append)
                    .truncate(!spec.open_append)
                    .mode(0o644)
                    .open(path)
            };
            let waited = Instant::now();
            let mut opened = try_open();
            while matches!(&opened, Err(e) if e.kind() == std::io::ErrorKind::NotFound)
                && waited.elapsed() < WAIT_FOR_OUTPUT_DIR
            {
                std::thread::sleep(Duration::from_millis(10));
                opened = try_open();
            }
            opened.map_err(|e| {
                    let hint = if e.kind() == std::io::ErrorKind::NotFound {
                        format!(
                            "; waited {} s for its directory; create it before you submit (as in Slurm, labpool does not create it)",
                            WAIT_FOR_OUTPUT_DIR.as_secs()
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "cannot open output file {} as {}: {e}{hint}",
                        path.display(),
                        spec.user
                    )
                })
        };
        std::fs::read_dir(&spec.workdir).map_err(|e| {
            format!(
                "cannot use working directory {} as {}: {e}",
                spec.workdir.display(),
                spec.user
            )
        })?;
        let out = open(&spec.stdout)?;
        let err = if spec.stderr == spec.stdout {
            out.try_clone().map_err(|e| e.to_string())?
        } else {
            open(&spec.stderr)?
        };
        Ok((out, err))
    })?
}

/// Starts the script as the job's user, in its cgroups and working directory.
fn spawn(
    spec: &ShimSpec,
    stdout: File,
    stderr: File,
    groups: Option<&JobCgroups>,
) -> std::io::Result<std::process::Child> {
    let env = match spec.login_env_s {
        Some(s) => match crate::login_env::load(
            &spec.user,
            &crate::login_env::Inside {
                identity: Some(identity(spec)),
                groups,
                key: spec.env.get(crate::procs::JOB_KEY_VAR).map(String::as_str),
            },
            Duration::from_secs(s.min(crate::login_env::MAX_TIMEOUT_S).into()),
        ) {
            Ok(login) => crate::login_env::merged(login, &spec.env),
            Err(e) => {
                let note = format!(
                    "labpool: --get-user-env: {e}; the job runs with the environment it was submitted with\n"
                );
                let _ = std::io::Write::write_all(&mut &stderr, note.as_bytes());
                spec.env.clone()
            }
        },
        None => spec.env.clone(),
    };
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    Sandbox::new(Some(identity(spec)), groups, Some(&spec.workdir))?.apply(&mut cmd);
    cmd.spawn()
}

/// Sends TERM to a shim, which then stops its job: the cancel path.
pub fn signal_shim(shim_pid: i32) -> nix::Result<()> {
    kill(Pid::from_raw(shim_pid), Signal::SIGTERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_comes_at_its_lead_time_but_never_at_the_start() {
        let at = |limit, before| warning_after(limit, before).as_secs();
        assert_eq!(at(3600, 90), 3510);
        // submitit's timeout_min=1 writes --signal=USR2@90.
        assert_eq!(at(60, 90), 15);
        assert_eq!(at(60, 60), 15);
        assert_eq!(at(10, 90), 5);
        assert_eq!(at(0, 5), 0);
    }
}
