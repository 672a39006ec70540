//! `--get-user-env`: the job owner's login environment (what `su - USER` sets up: their
//! profile, modules, conda init), read on the node just before the job starts. The submitted
//! environment is laid over it, as sbatch does: a variable set in both keeps its submitted value.
//!
//! The profile is the member's own code, so it runs as the job does and nowhere else: as the
//! member, in the job's cgroups (its devices and memory), carrying the job's key, with
//! signals as a job has them, bounded in time and in output.

use labpool_isolation::{Identity, JobCgroups, Sandbox};
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The longest timeout a job may give its login shell (as the CLI says: 1 to 600 s).
pub use crate::api::MAX_LOGIN_TIMEOUT_S as MAX_TIMEOUT_S;

/// Most bytes of a login shell's output read: what `env -0` prints fits many times over (the
/// kernel passes a program 2 MiB of environment at most).
const MAX_OUTPUT: usize = 4 << 20;

/// The line the login shell prints just before its environment, so that what the profile
/// itself prints is not taken for variables.
const MARK: &[u8] = b"LABPOOL-LOGIN-ENV\n";

/// Where and as whom the login shell runs: as the job does, inside the job.
pub struct Inside<'a> {
    /// The job's user, to become (`None`: already this process's).
    pub identity: Option<Identity>,
    /// The job's cgroups, when the node has them.
    pub groups: Option<&'a JobCgroups>,
    /// The job's key (`LABPOOL_JOB_KEY`), which marks every process the shell starts as the
    /// job's, so the job's end stops them wherever they went.
    pub key: Option<&'a str>,
}

/// The login environment of `user`: their login shell (`-sh`, as `login` and `su -` start
/// it, reading `/etc/profile` and their own profile) runs as them inside the job (its cgroups,
/// its key, a process group of its own, signals as a job's), given `timeout`, and prints its
/// environment. At the timeout, or when it prints more than 4 MiB, it and everything it
/// started are killed; so is whatever it left running once it is done.
pub fn load(
    user: &str,
    inside: &Inside,
    timeout: Duration,
) -> Result<BTreeMap<String, String>, String> {
    let entry = nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .ok_or_else(|| format!("{user} is not in this node's user database"))?;
    let shell = entry.shell.clone();
    let name = shell
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sh".into());
    let home = if entry.dir.is_dir() {
        entry.dir.clone()
    } else {
        "/".into()
    };
    let mut cmd = Command::new(&shell);
    cmd.arg0(format!("-{name}"))
        .args(["-c", "echo LABPOOL-LOGIN-ENV; exec env -0"])
        .env_clear()
        .env("HOME", &home)
        .env("USER", user)
        .env("LOGNAME", user)
        .env("SHELL", &shell)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(key) = inside.key {
        cmd.env(crate::procs::JOB_KEY_VAR, key);
    }
    Sandbox::new(inside.identity.clone(), inside.groups, Some(&home))
        .map_err(|e| e.to_string())?
        .apply(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the login shell {}: {e}", shell.display()))?;
    let group = Pid::from_raw(child.id() as i32);
    let mut out = child.stdout.take().expect("piped");
    let (tx, chunks) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || read_bounded(&mut out, &tx));
    let too_much = || {
        format!(
            "the login shell of {user} printed more than {} (is the profile printing in a loop?)",
            labpool_units::format_size(MAX_OUTPUT as u64)
        )
    };
    let t0 = Instant::now();
    let mut bytes = Vec::new();
    let outcome = loop {
        while let Ok(chunk) = chunks.try_recv() {
            bytes.extend_from_slice(&chunk);
        }
        if bytes.len() > MAX_OUTPUT {
            break Err(too_much());
        }
        // Seen but not reaped: the process group cannot be taken by anyone else yet.
        match waitid(
            Id::Pid(group),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG,
        ) {
            Ok(WaitStatus::Exited(_, 0)) => break Ok(()),
            Ok(WaitStatus::Exited(_, code)) => {
                break Err(format!("the login shell of {user} exited with {code}"));
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                break Err(format!("the login shell of {user} was killed by {sig}"));
            }
            Ok(_) => {}
            Err(e) => break Err(format!("cannot wait for the login shell: {e}")),
        }
        if t0.elapsed() > timeout {
            break Err(format!(
                "the login shell of {user} did not finish in {}s",
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The shell and whatever it started in its group: none of it outlives the reading.
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
    outcome?;
    // What was printed before the shell exited is in the pipe; a process the profile left
    // behind may hold it open, so what has come is taken.
    let until = Instant::now() + Duration::from_millis(500);
    while let Ok(chunk) = chunks.recv_timeout(until.saturating_duration_since(Instant::now())) {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_OUTPUT {
            return Err(too_much());
        }
    }
    Ok(parse(after_mark(&bytes)))
}

/// Sends what `out` gives, in chunks, until its end or just past [`MAX_OUTPUT`]. The reader
/// stops itself at the bound: the shim looks at what came every 10 ms, and a busy node can
/// keep it from looking for longer, while a profile printing in a loop fills the channel at the
/// pipe's speed (a CI run saw the shim at 110 MB).
fn read_bounded(out: &mut impl Read, tx: &mpsc::Sender<Vec<u8>>) {
    let mut buf = vec![0u8; 64 << 10];
    let mut read = 0;
    while let Ok(n) = out.read(&mut buf) {
        if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
            break;
        }
        read += n;
        if read > MAX_OUTPUT {
            break;
        }
    }
}

/// What follows the last [`MARK`] line: the environment, without the profile's own output.
fn after_mark(bytes: &[u8]) -> &[u8] {
    bytes
        .windows(MARK.len())
        .rposition(|w| w == MARK)
        .map_or(bytes, |at| &bytes[at + MARK.len()..])
}

/// `env -0` output: NUL-separated `KEY=VALUE` entries.
fn parse(bytes: &[u8]) -> BTreeMap<String, String> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|e| {
            let text = String::from_utf8_lossy(e);
            let (k, v) = text.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// The job's environment: the login one with the submitted one over it.
pub fn merged(
    login: BTreeMap<String, String>,
    job: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env = login;
    env.extend(job.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_read_no_further_than_the_bound_when_nobody_looks() {
        let (tx, rx) = mpsc::channel();
        read_bounded(&mut std::io::repeat(b'y').take(100 << 20), &tx);
        let held: usize = rx.try_iter().map(|c| c.len()).sum();
        assert!(
            held > MAX_OUTPUT && held <= MAX_OUTPUT + (64 << 10),
            "{held}"
        );
    }

    #[test]
    fn what_the_profile_prints_is_not_taken_for_variables() {
        let out = b"Welcome!\nA=1\nLABPOOL-LOGIN-ENV\nPATH=/x\0B=2\0";
        let env = parse(after_mark(out));
        assert_eq!(env.len(), 2);
        assert_eq!(env["PATH"], "/x");
    }

    #[test]
    fn the_submitted_environment_wins_over_the_login_one() {
        let login = parse(b"PATH=/login/bin\0MODULEPATH=/opt/mods\0A=b=c\0");
        assert_eq!(login["A"], "b=c");
        let job = BTreeMap::from([("PATH".to_string(), "/job/bin".to_string())]);
        let env = merged(login, &job);
        assert_eq!(env["PATH"], "/job/bin");
        assert_eq!(env["MODULEPATH"], "/opt/mods");
    }
}
