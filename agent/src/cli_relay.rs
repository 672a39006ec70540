//! This node's CLI: every request on the agent's socket goes to the controller, signed with the
//! caller's uid as the kernel reported it (munge's model, without munge). Paths between nodes are
//! refused: a member cannot pose as an agent. A request to turn into a tunnel (`labpool forward`)
//! is turned into one on the signed link too, and the two are joined.

use crate::socket::Peer;
use crate::transport::{SignedClient, error_response};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;

/// Longest a forwarded CLI call may take (an environment build answers when it is done).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(3 * 3600);

/// What the relay needs of the agent.
pub struct CliRelay {
    /// The signed link.
    pub client: SignedClient,
    /// The controller's address.
    pub join: String,
    /// This node's name, for errors.
    pub node: String,
}

/// Relays one request of this node's CLI to the controller.
pub async fn relay(
    State(relay): State<Arc<CliRelay>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Request,
) -> Response {
    let Some(uid) = peer.uid else {
        return error_response(
            StatusCode::FORBIDDEN,
            "the kernel did not report who is calling".into(),
            None,
        );
    };
    let uri = req.uri().clone();
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    if path.starts_with("/v1/agent/") || path.starts_with("/v1/peer/") {
        return error_response(
            StatusCode::FORBIDDEN,
            format!("{path} is for nodes, not for the CLI"),
            None,
        );
    }
    let unreachable = |e: String| {
        error_response(
            StatusCode::BAD_GATEWAY,
            format!(
                "node {}'s agent cannot reach the controller at {}: {e}",
                relay.node, relay.join
            ),
            Some(
                "check that `labpool serve` runs there and that `join` under [agent] names its listen address"
                    .into(),
            ),
        )
    };
    if crate::tunnel::wants_upgrade(&req) {
        return match relay.client.tunnel(&relay.join, &path, Some(uid)).await {
            Ok(upgraded) => crate::tunnel::switch_to(req, crate::tunnel::io(upgraded)),
            Err(crate::transport::CallError::Refused { status, body, .. }) => (
                StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                axum::Json(body),
            )
                .into_response(),
            Err(e) => unreachable(e.to_string()),
        };
    }
    let method = req.method().as_str().to_string();
    let body = match axum::body::to_bytes(req.into_body(), crate::api::MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("cannot read the request: {e}"),
                None,
            );
        }
    };
    let client = relay.client.with_timeout(FORWARD_TIMEOUT);
    match client
        .raw(&relay.join, &method, &path, Some(uid), body.to_vec())
        .await
    {
        Ok((status, bytes)) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            [("content-type", "application/json")],
            bytes,
        )
            .into_response(),
        Err(e) => unreachable(e.to_string()),
    }
}
