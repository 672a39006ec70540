//! Remote agents: the signed routes they call (register, heartbeat, reports) and what the engine
//! does with each, and remote nodes restored after a controller restart.

use crate::api::agent::{Heartbeat, Registered, Registration, ReportBatch};
use crate::engine::{Engine, NodeFacts, Request};
use crate::error::ApiError;
use crate::http::{AppState, ask};
use crate::nodes::link::spawn_link;
use crate::transport::Signed;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::{Extension, Json, Router};
use labpool_isolation::Support;

/// A node whose agent runs elsewhere.
#[derive(Debug, Clone)]
pub struct RemoteNode {
    /// Where its agent takes orders.
    pub address: String,
    /// The agent process that registered last; empty until one registers after a restart.
    pub instance: String,
    /// The labpool version that agent runs; empty until one registers after a restart.
    pub version: String,
    /// Last heartbeat or registration, ms.
    pub last_seen_ms: i64,
    /// Declared DOWN: its jobs were requeued or failed, and it must register again.
    pub down: bool,
    /// The last report batch taken from `instance`.
    pub last_report: u64,
    /// The last heartbeat.
    pub beat: Option<Heartbeat>,
    /// Silent this long (three of its heartbeats), the node is shown not responding, ms.
    pub late_after_ms: i64,
    /// What its order link has managed: set by the link, read by the node check.
    pub link_trouble: LinkTrouble,
    /// Why it is not responding and since when (ms), while it is not.
    pub not_responding: Option<(String, i64)>,
}

/// What an order link has managed, shared with the engine.
pub type LinkTrouble = std::sync::Arc<std::sync::Mutex<LinkState>>;

/// Whether an order link has delivered anything yet, and its last error while orders fail to
/// arrive. A node takes no job until its link has delivered (its first order goes out as it
/// registers), so a node registered at an address the controller cannot reach is never "up".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkState {
    /// An order batch was taken by the agent.
    pub delivered: bool,
    /// The last error, while orders fail to arrive; None once one is taken.
    pub error: Option<String>,
}

/// The reason a node just registered shows until its first orders are taken.
pub fn first_orders_pending(address: &str) -> String {
    format!("not responding: its agent at {address} has not taken its first orders yet")
}

/// Three heartbeats: a node silent this long has missed a few, as Slurm judges a node not
/// responding. An agent that does not say its period is taken as the default (10 s).
pub fn late_after_ms(heartbeat_ms: Option<u64>) -> i64 {
    let period = heartbeat_ms.unwrap_or(10_000).clamp(100, 600_000);
    // The agent keeps its period by real sleeps; the silence is measured on the clock.
    crate::clock::clock_ms(std::time::Duration::from_millis(3 * period))
}

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
    let mut beat: Heartbeat = parse(&body)?;
    let node = beat.node.clone();
    let (sent_ms, samples) = (beat.sent_ms, std::mem::take(&mut beat.samples));
    ask(&state, |reply| Request::AgentHeartbeat { beat, reply }).await??;
    if let Some(ms) = sent_ms {
        state.monitor.clock_of(&node, ms);
    }
    for s in samples {
        state.monitor.ingest(&node, s);
    }
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

impl Engine {
    /// After a restart: nodes known to have agents come back as they were, but take no jobs
    /// until their agents register again.
    pub(crate) async fn restore_remote(&mut self) -> anyhow::Result<()> {
        for (spec, gpu_source, address) in self.db.agent_nodes().await? {
            if self.reach.is_local(spec.name.as_str()) {
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
                    cache_dir: None,
                    checkpoint: None,
                },
            );
            self.reach.remote.insert(
                name,
                RemoteNode {
                    version: String::new(),
                    address,
                    instance: String::new(),
                    last_seen_ms: self.clock.now_ms(),
                    down: false,
                    last_report: 0,
                    beat: None,
                    late_after_ms: late_after_ms(None),
                    link_trouble: LinkTrouble::default(),
                    not_responding: None,
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
        if self.reach.is_local(name.as_str()) {
            return Ok(Err(ApiError::conflict(
                format!("node {name} is the controller's own node; an agent cannot take its name"),
                Some("give the agent another name under [node] in its config".into()),
            )));
        }
        // Agents may lag the controller by one minor release and never run ahead of it.
        if let Err(e) =
            crate::api::versions::agent_may_join(&name, &reg.version, crate::api::versions::THIS)
        {
            tracing::warn!("refused an agent: {e}");
            return Ok(Err(ApiError::conflict(
                e.to_string(),
                Some("see docs/admin/upgrades.md".into()),
            )));
        }
        let Some(client) = self.reach.cluster.clone() else {
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
            .upsert_node(&reg.node, &reg.gpu_source, self.clock.now_ms())
            .await?;
        self.db.set_node_agent(&name, &address).await?;
        // Over Slurm, a node taken from Slurm's list is served by its agent from now on.
        self.slurm_marks.agentless.remove(&name);
        self.nodes_facts.insert(
            name.clone(),
            NodeFacts {
                gpu_source: reg.gpu_source.clone(),
                isolation: reg.isolation.clone(),
                cache_dir: reg.cache_dir.clone(),
                checkpoint: reg.checkpoint.clone(),
            },
        );
        let trouble = LinkTrouble::default();
        let (link, orders) = spawn_link(name.clone(), address.clone(), client, trouble.clone());
        self.reach.connect(&name, orders);
        let previous = self.reach.remote.get(&name).cloned();
        let same_instance = previous
            .as_ref()
            .is_some_and(|p| p.instance == reg.instance);
        self.reach.remote.insert(
            name.clone(),
            RemoteNode {
                address: address.clone(),
                instance: reg.instance.clone(),
                version: reg.version.clone(),
                last_seen_ms: self.clock.now_ms(),
                down: false,
                last_report: if same_instance {
                    previous.as_ref().map_or(0, |p| p.last_report)
                } else {
                    0
                },
                beat: None,
                late_after_ms: late_after_ms(reg.heartbeat_ms),
                link_trouble: trouble,
                not_responding: Some((first_orders_pending(&address), self.clock.now_ms())),
            },
        );
        // It takes jobs once its first orders are taken (the node check sees it).
        self.sched
            .set_node_not_responding(&name, Some(first_orders_pending(&address)));
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

    /// A heartbeat: the node is alive. An agent the controller does not know (it restarted, or
    /// the node was declared DOWN) is told to register again.
    pub(crate) fn on_heartbeat(&mut self, beat: Heartbeat) -> Result<(), ApiError> {
        match self.reach.remote.get_mut(&beat.node) {
            Some(n) if n.instance == beat.instance && !n.down => {
                n.last_seen_ms = self.clock.now_ms();
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
        match self.reach.remote.get_mut(&batch.node) {
            Some(n) if n.instance == batch.instance && !n.down => {
                if batch.seq <= n.last_report {
                    return Ok(Ok(()));
                }
                n.last_report = batch.seq;
                n.last_seen_ms = self.clock.now_ms();
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
            // A node speaks only for itself; the lifecycle also checks that an attempt it
            // reports on runs there.
            if r.node() != batch.node {
                tracing::warn!(
                    from = %batch.node,
                    about = %r.node(),
                    "refused a report that node {} sent about node {}",
                    batch.node,
                    r.node()
                );
                continue;
            }
            self.on_report(r).await?;
        }
        Ok(Ok(()))
    }
}
