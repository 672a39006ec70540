//! `GET /v1/jobs/{id}/forward/{port}`: a tunnel to a port of a running job (`labpool forward`,
//! and the dashboard's notebooks), for the job's owner and admins only. Asked plainly, it checks
//! and says where the port is; asked to upgrade (`labpool_link::tunnel`), it becomes the
//! tunnel: to the port on the controller's own node through its in-process agent, or through
//! the job's agent over the signed link, where only a socket one of the job's own processes
//! listens on is reached (`labpool_agent::forward`).

use crate::api::sessions::ForwardView;
use crate::embedded::JobPorts;
use crate::error::ApiError;
use crate::http::{AppState, Peer, ask, caller};
use crate::identity::Caller;
use crate::transport::{CallError, SignedClient};
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use labpool_scheduler::JobState;
use std::sync::Arc;

pub use crate::tunnel::Stream;

/// How the controller reaches its jobs' ports.
pub struct Tunnels {
    /// Its own node's name and ports, when it runs one.
    pub local: Option<(String, Arc<dyn JobPorts>)>,
    /// The signed link to agents, when it takes agents.
    pub cluster: Option<SignedClient>,
}

/// The forward routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/jobs/{id}/forward/{port}", get(forward))
}

/// A tunnel to `port` of job `id`, opened for `caller`: refused unless they own the job (or are
/// an admin) and it runs, and with the agent's reason when no process of the job listens there.
pub async fn open(
    state: &AppState,
    caller: &Caller,
    id: u64,
    port: u16,
) -> Result<(Box<dyn Stream>, String), ApiError> {
    let row = super::owned_job(
        state,
        caller,
        id,
        "may reach only your own jobs' ports",
        Some("`labpool queue` lists your running jobs"),
    )
    .await?;
    let (Some(node), JobState::Running) = (row.node.clone(), row.state) else {
        return Err(ApiError::conflict(
            format!(
                "job {id} is {}: only a running job's ports can be reached",
                row.state
            ),
            Some(format!(
                "`labpool why {id}` says why it waits; `labpool show {id}` how it ended"
            )),
        ));
    };
    let refused = |not_listening: bool, message: String| {
        if not_listening {
            ApiError::not_found(
                message,
                Some(format!(
                    "start the server inside job {id} first; it may listen on 127.0.0.1"
                )),
            )
        } else {
            ApiError::bad_gateway(message, None)
        }
    };
    let tunnels = &state.tunnels;
    if let Some((local, ports)) = &tunnels.local
        && *local == node
    {
        let stream = ports
            .open(id, row.attempt, row.uid, port)
            .await
            .map_err(|e| refused(e.not_listening, e.message))?;
        return Ok((Box::new(stream), node));
    }
    let nodes = ask(state, |reply| crate::engine::request::Request::Nodes {
        reply,
    })
    .await?;
    let agent = nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.agent.clone());
    let (Some(agent), Some(client)) = (agent, &tunnels.cluster) else {
        return Err(ApiError::conflict(
            format!(
                "job {id} runs on {node}, whose ports labpool cannot reach: it has no labpool agent (a Slurm node)"
            ),
            Some("use ssh -L to the node, as Slurm's users do".to_string()),
        ));
    };
    let path = format!(
        "/v1/agent/forward?job={id}&attempt={}&uid={}&port={port}",
        row.attempt, row.uid
    );
    match client.tunnel(&agent, &path, None).await {
        Ok(upgraded) => Ok((Box::new(crate::tunnel::io(upgraded)), node)),
        Err(CallError::Refused { status, body, .. }) => Err(refused(status == 404, body.error)),
        Err(e) => Err(ApiError::bad_gateway(
            format!("node {node}'s agent at {agent} did not open the tunnel: {e}"),
            None,
        )),
    }
}

async fn forward(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((id, port)): Path<(String, String)>,
    req: Request,
) -> Response {
    let caller = match caller(&state, &peer) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let (Ok(id), Ok(port)) = (id.parse::<u64>(), port.parse::<u16>()) else {
        return ApiError::bad_request(
            format!("'{id}' '{port}': give a job id and a port from 1 to 65535"),
            None,
        )
        .into_response();
    };
    if port == 0 {
        return ApiError::bad_request("port 0: give a port from 1 to 65535", None).into_response();
    }
    match open(&state, &caller, id, port).await {
        Ok((stream, _)) if crate::tunnel::wants_upgrade(&req) => {
            crate::tunnel::switch_to(req, stream)
        }
        Ok((_, node)) => Json(ForwardView {
            job_id: id,
            node,
            port,
        })
        .into_response(),
        Err(e) => e.into_response(),
    }
}

/// The tunnels the dashboard opens for a logged-in member (a notebook's page), checked as the
/// API checks them.
pub struct MemberTunnels(pub AppState);

impl crate::tunnel::JobTunnels for MemberTunnels {
    fn open(&self, uid: u32, job: u64, port: u16) -> crate::tunnel::Opening {
        let state = self.0.clone();
        Box::pin(async move {
            let caller = crate::identity::resolve(uid, &state.config.controller.admin_group)
                .map_err(|e| (403, e.to_string()))?;
            open(&state, &caller, job, port)
                .await
                .map(|(stream, _)| stream)
                .map_err(|e| (e.status, e.body.error))
        })
    }
}
