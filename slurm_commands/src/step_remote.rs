//! `srun`'s side of a step's tasks on another node of the gang: it sends them to that node's
//! step launcher (see [`crate::api::gang`]) and relays their output and exit codes.

use super::step_output::{StepOutput, TaskPlace};
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
    /// The node's index in the job (`%n` in output patterns).
    pub node_index: u32,
}

/// Runs `req`'s tasks on `at`, writing their lines as they come to `output` (prefixed with
/// the rank, `width` wide, with `-l`), and returns each task's (rank, exit code, signal).
pub fn run(
    at: &Launcher,
    req: &StepRequest,
    label: Option<usize>,
    output: &StepOutput,
) -> Result<TaskEnds, String> {
    let started = Instant::now();
    loop {
        match attempt(at, req, label, output, started)? {
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
    output: &StepOutput,
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
    let place = |rank| TaskPlace {
        rank,
        node_index: at.node_index,
        node,
    };
    let reader = BufReader::new(stream);
    for frame in reader.lines() {
        let frame = frame.map_err(|e| format!("node {node}: {e}"))?;
        let frame: StepFrame = serde_json::from_str(&frame)
            .map_err(|e| format!("node {node} sent a line that is not a step frame: {e}"))?;
        match frame {
            StepFrame::Out { rank, line } => output.line(false, place(rank), &line, label),
            StepFrame::Err { rank, line } => output.line(true, place(rank), &line, label),
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
