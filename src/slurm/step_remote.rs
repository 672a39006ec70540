//! `srun`'s side of a step's tasks on another node of the gang: it sends them to that node's
//! step launcher (see [`crate::api::gang`]) and relays their output and exit codes.

use crate::api::gang::{StepFrame, StepRequest};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Each task's end: (rank, exit code, signal).
pub type TaskEnds = Vec<(u32, i32, Option<i32>)>;

/// How long `srun` keeps trying to reach a launcher that is still starting.
const CONNECT_FOR: Duration = Duration::from_secs(15);

/// Where a node's step launcher answers, and the gang's secret both sides prove.
pub struct Launcher<'a> {
    /// The node's name.
    pub node: &'a str,
    /// Its address.
    pub host: &'a str,
    /// The job's step port.
    pub port: u16,
    /// The gang's secret.
    pub secret: &'a str,
}

/// Runs `req`'s tasks on `at`, printing their lines as they come (prefixed with the rank,
/// `width` wide, with `-l`), and returns each task's (rank, exit code, signal).
pub fn run(at: &Launcher, req: &StepRequest, label: Option<usize>) -> Result<TaskEnds, String> {
    let started = Instant::now();
    loop {
        match attempt(at, req, label, started)? {
            Some(codes) => return Ok(codes),
            // A launcher of the job's previous attempt on this port, being stopped (it cannot
            // prove this attempt's secret), or one busy with its connections: try again.
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// One try: the tasks' ends, or `None` when what answered could not prove the gang's secret
/// (another attempt's launcher) and there is time left to wait for this attempt's.
fn attempt(
    at: &Launcher,
    req: &StepRequest,
    label: Option<usize>,
    started: Instant,
) -> Result<Option<TaskEnds>, String> {
    let (node, host, port) = (at.node, at.host, at.port);
    let mut stream = loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => break s,
            Err(_) if started.elapsed() < CONNECT_FOR => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(format!(
                    "cannot reach the step launcher of node {node} at {host}:{port}: {e}; is the node up (`labpool nodes`)?"
                ));
            }
        }
    };
    if let Err(e) = crate::link_auth::client(&stream, at.secret) {
        if started.elapsed() < CONNECT_FOR {
            return Ok(None);
        }
        return Err(format!(
            "the step launcher of node {node} at {host}:{port} is not this job's ({e}); is another process holding the job's port there?"
        ));
    }
    let mut line = serde_json::to_string(req).map_err(|e| e.to_string())?;
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .map_err(|e| format!("node {node}: {e}"))?;
    let reader = BufReader::new(stream);
    for frame in reader.lines() {
        let frame = frame.map_err(|e| format!("node {node}: {e}"))?;
        let frame: StepFrame = serde_json::from_str(&frame)
            .map_err(|e| format!("node {node} sent a line that is not a step frame: {e}"))?;
        match frame {
            StepFrame::Out { rank, line } => print_line(false, rank, &line, label),
            StepFrame::Err { rank, line } => print_line(true, rank, &line, label),
            StepFrame::Exit { codes } => return Ok(Some(codes)),
            StepFrame::Refused { why } => {
                return Err(format!("node {node} refused the step: {why}"));
            }
        }
    }
    Err(format!(
        "lost node {node} before its tasks ended (its step launcher stopped)"
    ))
}

/// Writes one task line to `srun`'s own output, with the rank first under `-l`.
pub fn print_line(to_stderr: bool, rank: u32, line: &str, label: Option<usize>) {
    let text = match label {
        Some(width) => format!("{rank:>width$}: {line}\n"),
        None => format!("{line}\n"),
    };
    let _ = if to_stderr {
        std::io::stderr().write_all(text.as_bytes())
    } else {
        std::io::stdout().write_all(text.as_bytes())
    };
}
