//! Nodes served by remote agents (`labpool agent`): registration, heartbeats, the order link
//! to each agent, and what happens when a node stops answering.
//!
//! Decisions recorded here:
//! - The per-job epoch is the attempt number. Every order and report names (job, attempt); a
//!   requeued job runs again under the next attempt; a report about any other attempt than the
//!   current one is ignored, and a node that registers is told exactly which attempts it should
//!   be running (`Adopt`): it kills every other. So a node that comes back after it was
//!   declared DOWN never keeps running a job that was requeued or failed meanwhile.
//! - Orders go to an agent over one link at a time; a new registration opens a new link and
//!   the agent refuses orders from the old one, so nothing sent before the fence lands after.
//! - A node that misses heartbeats for `node_timeout` goes DOWN: its running jobs are requeued
//!   (or end NODE_FAIL with `--no-requeue`), its staging jobs wait again. While it is only late,
//!   nothing is placed on it and nothing of it is touched.
//! - After a controller restart, nodes known to have agents wait `node_timeout` to register
//!   again before they are declared DOWN; their jobs keep their GPUs meanwhile.

use crate::agent::isolation::Support;
use crate::agent::protocol::{
    AgentOrder, Heartbeat, OrderBatch, PeerRef, Registered, Registration, ReportBatch,
};
use crate::clock::now_ms;
use crate::controller::engine::{Engine, NodeFacts, PassNeed, Request};
use crate::controller::error::ApiError;
use crate::controller::http::{AppState, ask};
use crate::transport::{Signed, SignedClient};
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::{Extension, Json, Router};
use labpool_lifecycle::{Event, StageKind};
use labpool_scheduler::{JobState, Timestamp};
use std::time::Duration;
use tokio::sync::mpsc;

/// A node whose agent runs elsewhere.
#[derive(Debug, Clone)]
pub struct RemoteNode {
    /// Where its agent takes orders.
    pub address: String,
    /// The agent process that registered last; empty until one registers after a restart.
    pub instance: String,
    /// Last heartbeat or registration, ms.
    pub last_seen_ms: i64,
    /// Declared DOWN: its jobs were requeued or failed, and it must register again.
    pub down: bool,
    /// The last report batch taken from `instance`.
    pub last_report: u64,
    /// The last heartbeat.
    pub beat: Option<Heartbeat>,
}

/// Most orders in one batch.
const ORDER_BATCH: usize = 256;

/// The agent-facing routes (signed; see [`crate::transport::verify_signed`]).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/agent/register", post(register))
        .route("/v1/agent/heartbeat", post(heartbeat))
        .route("/v1/agent/reports", post(reports))
}

/// Agent routes take only an agent's own requests, never one it forwards for a member.
fn agent_only(signed: &Signed) -> Result<(), ApiError> {
    if signed.uid.is_some() {
        return Err(ApiError::forbidden(
            "only node agents may call /v1/agent/ paths",
            None,
        ));
    }
    Ok(())
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("bad agent message: {e}"), None))
}

async fn register(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Result<Json<Registered>, ApiError> {
    agent_only(&signed)?;
    let reg: Registration = parse(&body)?;
    let from = signed.from;
    Ok(Json(
        ask(&state, |reply| Request::AgentRegister {
            reg: Box::new(reg),
            from,
            reply,
        })
        .await??,
    ))
}

async fn heartbeat(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    agent_only(&signed)?;
    let beat: Heartbeat = parse(&body)?;
    ask(&state, |reply| Request::AgentHeartbeat { beat, reply }).await??;
    Ok(Json(serde_json::json!({"ok": true})))
}

async fn reports(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    agent_only(&signed)?;
    let batch: ReportBatch = parse(&body)?;
    ask(&state, |reply| Request::AgentReports { batch, reply }).await??;
    Ok(Json(serde_json::json!({"ok": true})))
}

/// Opens an order link to the agent at `address`: orders sent on the returned channel go out
/// in order, in batches, each retried until the agent takes it or the link is dropped (a new
/// registration, or the node went DOWN).
pub fn spawn_link(
    node: String,
    address: String,
    client: SignedClient,
) -> (u64, mpsc::UnboundedSender<AgentOrder>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<AgentOrder>();
    // 53 bits: the id survives a JSON round trip through any parser.
    let link = crate::transport::random_u64() >> 11;
    tokio::spawn(async move {
        let mut seq = 0;
        while let Some(first) = rx.recv().await {
            let mut orders = vec![first];
            while orders.len() < ORDER_BATCH {
                match rx.try_recv() {
                    Ok(o) => orders.push(o),
                    Err(_) => break,
                }
            }
            seq += 1;
            let body =
                serde_json::to_vec(&OrderBatch { link, seq, orders }).expect("orders serialise");
            let mut backoff = Duration::from_millis(50);
            let mut warned = false;
            loop {
                if rx.is_closed() {
                    return;
                }
                match client
                    .call(&address, "POST", "/v1/agent/orders", None, body.clone())
                    .await
                {
                    Ok(_) => break,
                    Err(e) => {
                        // The first orders of a link may arrive before the agent has read its
                        // registration answer: only a refusal that lasts is worth a warning.
                        if !warned && backoff >= Duration::from_millis(400) {
                            tracing::warn!(node, address, "cannot send orders, retrying: {e}");
                            warned = true;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                }
            }
        }
    });
    (link, tx)
}

impl Engine {
    /// After a restart: nodes known to have agents come back as they were, but take no jobs
    /// until their agents register again.
    pub(crate) async fn restore_remote(&mut self) -> anyhow::Result<()> {
        for (spec, gpu_source, address) in self.db.agent_nodes().await? {
            if self.local_node.as_deref() == Some(spec.name.as_str()) {
                continue;
            }
            let name = spec.name.clone();
            if let Err(e) = self.sched.upsert_node(spec) {
                tracing::error!("{e}");
                continue;
            }
            self.sched.set_node_down(
                &name,
                Some("waiting for its agent to register again after a controller restart".into()),
            );
            self.nodes_facts.insert(
                name.clone(),
                NodeFacts {
                    gpu_source,
                    isolation: Support::default(),
                },
            );
            self.remote.insert(
                name,
                RemoteNode {
                    address,
                    instance: String::new(),
                    last_seen_ms: now_ms(),
                    down: false,
                    last_report: 0,
                    beat: None,
                },
            );
        }
        Ok(())
    }

    /// An agent registers: its node is (again) part of the pool, a new order link is opened,
    /// and it is told which attempts it should be running.
    pub(crate) async fn on_register(
        &mut self,
        reg: Registration,
        from: std::net::SocketAddr,
    ) -> anyhow::Result<Result<Registered, ApiError>> {
        let name = reg.node.name.clone();
        if self.local_node.as_deref() == Some(name.as_str()) {
            return Ok(Err(ApiError::conflict(
                format!("node {name} is the controller's own node; an agent cannot take its name"),
                Some("give the agent another name under [node] in its config".into()),
            )));
        }
        let Some(client) = self.cluster.clone() else {
            return Ok(Err(ApiError::conflict(
                "this controller takes no agents",
                Some("set listen under [controller]".into()),
            )));
        };
        let address = reg
            .advertise
            .clone()
            .unwrap_or_else(|| std::net::SocketAddr::new(from.ip(), reg.port).to_string());
        if let Err(e) = self.sched.upsert_node(reg.node.clone()) {
            return Ok(Err(ApiError::bad_request(e.to_string(), None)));
        }
        self.db
            .upsert_node(&reg.node, &reg.gpu_source, now_ms())
            .await?;
        self.db.set_node_agent(&name, &address).await?;
        self.nodes_facts.insert(
            name.clone(),
            NodeFacts {
                gpu_source: reg.gpu_source.clone(),
                isolation: reg.isolation.clone(),
            },
        );
        let (link, orders) = spawn_link(name.clone(), address.clone(), client);
        self.agents.insert(name.clone(), orders);
        let previous = self.remote.get(&name).cloned();
        let same_instance = previous
            .as_ref()
            .is_some_and(|p| p.instance == reg.instance);
        self.remote.insert(
            name.clone(),
            RemoteNode {
                address: address.clone(),
                instance: reg.instance.clone(),
                last_seen_ms: now_ms(),
                down: false,
                last_report: if same_instance {
                    previous.as_ref().map_or(0, |p| p.last_report)
                } else {
                    0
                },
                beat: None,
            },
        );
        tracing::info!(
            node = name,
            address,
            link,
            gpus = reg.node.gpus.len(),
            "agent registered"
        );
        self.resend_to(&name);
        Ok(Ok(Registered {
            link,
            address,
            node_timeout_ms: self.config.controller.node_timeout.as_millis() as u64,
        }))
    }

    /// Tells a (re)connected node what it should be running, and gives it again what its jobs
    /// wait for: stages, environment stages and cancels.
    fn resend_to(&mut self, node: &str) {
        self.outbox.order(node, AgentOrder::Inventory);
        self.lifecycle(Event::NodeUp {
            node: node.to_string(),
        });
        let staging: Vec<(u64, u32)> = self
            .jobs
            .jobs()
            .map(|(_, r)| r)
            .filter(|r| r.node.as_deref() == Some(node) && r.state == JobState::Staging)
            .map(|r| (r.id, r.attempt))
            .collect();
        for (job, attempt) in staging {
            let data_done = self
                .data
                .job_versions
                .get(&job)
                .is_none_or(|v| v.iter().all(|(n, ver)| self.data.complete_on(node, n, ver)));
            let env_needed = self.jobs.job(job).is_some_and(|r| self.needs_env_stage(r));
            let kind = if data_done && env_needed {
                StageKind::Env
            } else {
                StageKind::Data
            };
            self.outbox.stage(job, attempt, node, kind);
        }
    }

    /// A heartbeat: the node is alive. An agent the controller does not know (it restarted, or
    /// the node was declared DOWN) is told to register again.
    pub(crate) fn on_heartbeat(&mut self, beat: Heartbeat) -> Result<(), ApiError> {
        match self.remote.get_mut(&beat.node) {
            Some(n) if n.instance == beat.instance && !n.down => {
                n.last_seen_ms = now_ms();
                n.beat = Some(beat);
                Ok(())
            }
            Some(n) if n.down => Err(ApiError::conflict(
                format!(
                    "node {} was declared DOWN; register again to rejoin",
                    beat.node
                ),
                None,
            )),
            _ => Err(ApiError::conflict(
                format!(
                    "node {} (agent {}) is not registered here; register again",
                    beat.node, beat.instance
                ),
                None,
            )),
        }
    }

    /// Reports from a remote agent, each batch handled once and in order.
    pub(crate) async fn on_agent_reports(
        &mut self,
        batch: ReportBatch,
    ) -> anyhow::Result<Result<(), ApiError>> {
        match self.remote.get_mut(&batch.node) {
            Some(n) if n.instance == batch.instance && !n.down => {
                if batch.seq <= n.last_report {
                    return Ok(Ok(()));
                }
                n.last_report = batch.seq;
                n.last_seen_ms = now_ms();
            }
            _ => {
                return Ok(Err(ApiError::conflict(
                    format!(
                        "reports from node {} (agent {}), which is not registered here; register again",
                        batch.node, batch.instance
                    ),
                    None,
                )));
            }
        }
        for r in batch.reports {
            self.on_report(r).await?;
        }
        Ok(Ok(()))
    }

    /// Declares DOWN every remote node whose last sign of life is older than `node_timeout`.
    pub(crate) async fn check_nodes(&mut self) -> anyhow::Result<()> {
        let timeout = self.config.controller.node_timeout.as_millis() as i64;
        let now = now_ms();
        let late: Vec<(String, i64, bool)> = self
            .remote
            .iter()
            .filter(|(_, n)| !n.down && now - n.last_seen_ms > timeout)
            .map(|(name, n)| (name.clone(), n.last_seen_ms, n.instance.is_empty()))
            .collect();
        for (node, last, never) in late {
            let timeout_text = humantime::format_duration(self.config.controller.node_timeout);
            let reason = if never {
                format!(
                    "its agent did not register within node_timeout ({timeout_text}) of the controller's restart"
                )
            } else {
                format!(
                    "no heartbeat since {} (node_timeout {timeout_text})",
                    crate::clock::short(last)
                )
            };
            self.node_down(&node, &reason);
        }
        Ok(())
    }

    /// The node is DOWN: no orders go to it, and its jobs are requeued or failed.
    fn node_down(&mut self, node: &str, reason: &str) {
        self.pass_need = PassNeed::Full;
        tracing::warn!(node, reason, "node DOWN");
        self.sched
            .set_node_down(node, Some(format!("DOWN: {reason}")));
        self.agents.remove(node);
        if let Some(n) = self.remote.get_mut(node) {
            n.down = true;
        }
        // Its stages, and the stages it served, will not report an end.
        self.data
            .peer_serving
            .retain(|(target, _, _), source| target != node && source != node);
        self.lifecycle(Event::NodeDown {
            node: node.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Peers that hold `name@version` complete, for a stage on `node`: remote nodes that are
    /// up, fewest stages served first, so eight nodes starting on one dataset spread over the
    /// nodes that have it. The first is counted as serving until the stage ends.
    pub(crate) fn peers_for(&mut self, node: &str, name: &str, version: &str) -> Vec<PeerRef> {
        let serving = |peer: &str| {
            self.data
                .peer_serving
                .values()
                .filter(|s| s.as_str() == peer)
                .count()
        };
        let mut candidates: Vec<(usize, String, String)> = self
            .remote
            .iter()
            .filter(|(n, r)| n.as_str() != node && !r.down && !r.instance.is_empty())
            .filter(|(n, _)| self.agents.contains_key(n.as_str()))
            .filter(|(n, _)| self.data.complete_on(n, name, version))
            .map(|(n, r)| (serving(n), n.clone(), r.address.clone()))
            .collect();
        candidates.sort();
        if let Some((_, first, _)) = candidates.first() {
            self.data.peer_serving.insert(
                (node.to_string(), name.to_string(), version.to_string()),
                first.clone(),
            );
        }
        candidates
            .into_iter()
            .map(|(_, node, address)| PeerRef { node, address })
            .collect()
    }

    /// A stage on `node` ended: the peers it used serve one stage less.
    pub(crate) fn peer_stage_ended(&mut self, node: &str, versions: &[(String, String)]) {
        for (name, version) in versions {
            self.data
                .peer_serving
                .remove(&(node.to_string(), name.clone(), version.clone()));
        }
    }

    /// A remote node's last heartbeat, for `labpool nodes`.
    pub(crate) fn heartbeat_of(&self, node: &str) -> Option<&Heartbeat> {
        self.remote.get(node).and_then(|r| r.beat.as_ref())
    }

    /// When the controller last heard from a remote node, for `labpool nodes`.
    pub(crate) fn last_seen(&self, node: &str) -> Option<Timestamp> {
        self.remote.get(node).map(|r| Timestamp(r.last_seen_ms))
    }
}
