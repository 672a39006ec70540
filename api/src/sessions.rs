//! Joining a running session again (`labpool attach JOB`, `sattach JOB`): where its host
//! answers, and the token that proves the caller may talk to it. Given to the job's owner and
//! to admins only.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `GET /v1/jobs/{id}/session`: how to reach a running session's host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionView {
    /// The job.
    pub job_id: u64,
    /// Its owner's uid: the host runs as this user, and a local socket served by anyone else is
    /// not talked to.
    pub uid: u32,
    /// The node it runs on.
    pub node: Option<String>,
    /// The host's Unix socket, on the node where the session began.
    pub socket: PathBuf,
    /// The session's token, shown to the host over TCP (on the job's session port, at its
    /// node's agent host).
    pub token: String,
}

/// The variable the session's token travels in, from `labpool run` to the session host.
pub const TOKEN_VAR: &str = "LABPOOL_SESSION_TOKEN";

/// `POST /v1/jobs/{id}/session/report`: a session's host reports in, every few seconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionReport {
    /// Its member typed (or its notebook's kernel ran) since the last report.
    pub input: bool,
}

/// The answer to a [`SessionReport`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionReply {
    /// Words for the session's terminal (the idle rule's warning), if any.
    pub notice: Option<String>,
}

/// `GET /v1/jobs/{id}/forward/{port}` asked plainly: the port can be reached, and where it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForwardView {
    /// The job.
    pub job_id: u64,
    /// Its node.
    pub node: String,
    /// The port, on the node.
    pub port: u16,
}

/// The variable a notebook's token travels in, from `labpool notebook` to JupyterLab in the
/// job: the dashboard's proxy shows it to JupyterLab, so the member never has to.
pub const NOTEBOOK_TOKEN_VAR: &str = "LABPOOL_NOTEBOOK_TOKEN";

/// `GET /v1/jobs/{id}/notebook`: a running notebook's port and token, for its owner and admins
/// (the dashboard's proxy uses them; they are never shown in a page).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotebookView {
    /// The job.
    pub job_id: u64,
    /// JupyterLab's port on the job's node.
    pub port: u16,
    /// JupyterLab's token.
    pub token: String,
    /// The path it is served under, on the dashboard too: `/notebooks/JOB/`.
    pub base_url: String,
}

/// The path a notebook is served under, in the job and on the dashboard.
pub fn notebook_base(job: u64) -> String {
    format!("/notebooks/{job}/")
}

/// The port a notebook's JupyterLab listens on: the job's second leased port (the one a
/// session would use), from the first of `LABPOOL_PORTS`' `FIRST-LAST`.
pub fn notebook_port(first: u16) -> Option<u16> {
    first.checked_add(1)
}
