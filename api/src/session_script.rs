//! The script of an interactive session (`labpool run --pty`): the CLI writes it
//! ([`host_command`]), and the controller reads it back ([`session_of_script`]) to call the job
//! interactive and to tell its owner where to attach again. One grammar, on both sides of the
//! API.

use std::path::{Path, PathBuf};

/// The command a session's script runs: the session host on `socket`, ending the session
/// after `idle` without input, giving `command` (the user's shell when empty).
pub fn host_command(
    socket: &Path,
    idle: std::time::Duration,
    command: &[String],
) -> Option<String> {
    let quoted: Vec<String> = command
        .iter()
        .map(|w| shlex::try_quote(w).ok().map(|q| q.into_owned()))
        .collect::<Option<_>>()?;
    let socket = shlex::try_quote(socket.to_str()?).ok()?.into_owned();
    Some(format!(
        "exec labpool session-host --socket {socket} --idle {}s -- {}",
        idle.as_secs().max(1),
        quoted.join(" ")
    ))
}

/// What a session's script says, as [`host_command`] wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionScript {
    /// The Unix socket the host serves on, in its owner's private directory.
    pub socket: PathBuf,
    /// The idle limit.
    pub idle: std::time::Duration,
}

/// The words of a script that is `#!/bin/sh` and one command line (blank lines after it
/// allowed), as the shell would split them: `None` for any other script.
fn script_words(script: &str) -> Option<Vec<String>> {
    let mut lines = script.lines();
    if lines.next()? != "#!/bin/sh" {
        return None;
    }
    let words = shlex::split(lines.next()?)?;
    if lines.any(|l| !l.trim().is_empty()) {
        return None;
    }
    Some(words)
}

/// `3600s`, as the scripts write an idle limit.
fn seconds(idle: &str) -> Option<std::time::Duration> {
    let secs = idle.strip_suffix('s')?.parse::<u64>().ok()?;
    Some(std::time::Duration::from_secs(secs))
}

/// The session a script hosts, as [`host_command`] writes it (after `#!/bin/sh`): `None` for
/// any other script.
pub fn session_of_script(script: &str) -> Option<SessionScript> {
    match script_words(script)?.as_slice() {
        [exec, lp, host, s, socket, i, idle, dash, ..]
            if exec == "exec"
                && lp == "labpool"
                && host == "session-host"
                && s == "--socket"
                && i == "--idle"
                && dash == "--" =>
        {
            Some(SessionScript {
                socket: PathBuf::from(socket),
                idle: seconds(idle)?,
            })
        }
        _ => None,
    }
}

/// The command a notebook's script runs (`labpool notebook`): JupyterLab inside the job, behind
/// the dashboard, ended by its host after `idle` without activity where the controller cannot
/// be reached.
pub fn notebook_command(idle: std::time::Duration) -> String {
    format!(
        "exec labpool notebook-host --idle {}s",
        idle.as_secs().max(1)
    )
}

/// The idle limit of a notebook's script as [`notebook_command`] writes it (after `#!/bin/sh`):
/// `None` for any other script.
pub fn notebook_of_script(script: &str) -> Option<std::time::Duration> {
    match script_words(script)?.as_slice() {
        [exec, lp, host, i, idle]
            if exec == "exec" && lp == "labpool" && host == "notebook-host" && i == "--idle" =>
        {
            seconds(idle)
        }
        _ => None,
    }
}

/// The idle limit of a session's or a notebook's script: `None` for any other script. The
/// controller calls a job interactive (never preempted) only when its script is one of these,
/// and only with an idle limit within the pool's.
pub fn idle_of_script(script: &str) -> Option<std::time::Duration> {
    session_of_script(script)
        .map(|s| s.idle)
        .or_else(|| notebook_of_script(script))
}
