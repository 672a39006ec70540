//! Running a tool as one step of a lock or a build: its output streams into the log as it
//! comes, and a failure names the step, the command line, the exit status and the tool's own
//! error lines.

use crate::EnvError;
use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};

/// How much of a tool's output is kept in memory to pick error lines from.
const TAIL_BYTES: usize = 256 * 1024;

/// Runs `cmd` with stdin closed, its stdout and stderr (interleaved) streamed into `log`.
/// Fails with [`EnvError::StepFailed`] naming `step` unless it exits 0. Returns the output's
/// tail.
pub(crate) fn step(step: &str, cmd: &mut Command, log: &mut dyn Write) -> Result<String, EnvError> {
    let (status, output) = stream(cmd, log)?;
    if status.success() {
        Ok(output)
    } else {
        Err(failed(step, cmd, status, &output))
    }
}

/// Runs `cmd` like [`step`] but leaves judging the exit status to the caller.
pub(crate) fn stream(
    cmd: &mut Command,
    log: &mut dyn Write,
) -> Result<(ExitStatus, String), EnvError> {
    note(log, &format!("$ {}", command_line(cmd)));
    let program = std::path::PathBuf::from(cmd.get_program());
    let (mut reader, writer) =
        std::io::pipe().map_err(EnvError::io("create a pipe for", &program))?;
    let writer2 = writer
        .try_clone()
        .map_err(EnvError::io("create a pipe for", &program))?;
    cmd.stdin(Stdio::null()).stdout(writer2).stderr(writer);
    let spawned = cmd.spawn();
    // The Command holds the pipe's write ends; replacing them closes ours, so the read below
    // ends when the child (and anything it started) exits.
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = spawned.map_err(|source| EnvError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut tail = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(EnvError::io("read the output of", &program)(e)),
        };
        let _ = log.write_all(&buf[..n]);
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > TAIL_BYTES {
            tail.drain(..tail.len() - TAIL_BYTES);
        }
    }
    let status = child.wait().map_err(EnvError::io("wait for", &program))?;
    let _ = log.flush();
    Ok((status, String::from_utf8_lossy(&tail).into_owned()))
}

/// Runs `cmd` and returns its stdout; on failure the error carries its stderr.
pub(crate) fn capture(step: &str, cmd: &mut Command) -> Result<String, EnvError> {
    let program = std::path::PathBuf::from(cmd.get_program());
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| EnvError::Spawn { program, source })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(failed(
            step,
            cmd,
            out.status,
            &String::from_utf8_lossy(&out.stderr),
        ))
    }
}

/// The [`EnvError::StepFailed`] for `cmd`, with the error lines of `output`.
pub(crate) fn failed(step: &str, cmd: &Command, status: ExitStatus, output: &str) -> EnvError {
    EnvError::StepFailed {
        step: step.to_string(),
        command: command_line(cmd),
        status: format!("ended with {status}"),
        detail: error_lines(output),
    }
}

/// The tool's last words: from its first line that mentions an error to the end (else all of
/// it), at most the last ten non-blank lines, each on a new, indented line.
fn error_lines(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let first_error = lines
        .iter()
        .position(|l| l.to_lowercase().contains("error"))
        .unwrap_or(0);
    let start = first_error.max(lines.len().saturating_sub(10));
    lines[start..].iter().map(|l| format!("\n  {l}")).collect()
}

/// Writes a line of labpool's own into the log (a log that fails to write is not fatal).
pub(crate) fn note(log: &mut dyn Write, line: &str) {
    let _ = writeln!(log, "labpool: {line}");
}

/// The command line as a shell would need it typed.
pub(crate) fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` quoted for a POSIX shell: unchanged when it is plainly safe, else in single quotes with
/// each `'` written as `'\''`.
pub(crate) fn quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
