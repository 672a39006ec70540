//! `labpool agent`: this machine as one node of a pool whose controller runs elsewhere. It
//! registers, heartbeats, carries out the controller's orders through the same executor the
//! one-box controller runs in-process, sends its reports back (retried until taken), serves its
//! dataset cache to peers, and forwards this node's CLI to the controller, vouching for each
//! caller's uid.

use crate::api::agent::{
    AgentOrder, AgentReport, Heartbeat, OrderBatch, PeerQuery, Registered, Registration,
    ReportBatch,
};
use crate::copy_host;
use crate::node::LocalNode;
use crate::peer::HttpPeers;
use crate::retry::backoff;
use crate::settings::{AgentConfig, Config};
use crate::socket::Peer;
use crate::transport::{CallError, SharedVerifier, SignedClient, error_response, verify_signed};
use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use backon::Retryable;
use labpool_cache::store::NodeCache;
use labpool_cluster::{ClusterKey, Verifier};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Most reports in one batch.
const REPORT_BATCH: usize = 512;

/// GPU readings kept for the controller while heartbeats do not get through; older ones are
/// dropped (the node's own `/metrics` still shows the latest).
pub const SAMPLES_KEPT: usize = 32;

/// What the agent's tasks share.
struct Shared {
    node: String,
    instance: String,
    join: String,
    client: SignedClient,
    registration: Registration,
    /// The link orders are taken from, and the last batch applied on it.
    link: Mutex<Option<(u64, u64)>>,
    /// Serialises re-registrations.
    registering: tokio::sync::Mutex<()>,
    orders: mpsc::UnboundedSender<AgentOrder>,
    cache: NodeCache,
    /// The job spool: its directories are the jobs running here.
    spool: std::path::PathBuf,
    /// GPU readings not yet sent, oldest first.
    samples: Mutex<std::collections::VecDeque<labpool_monitor::sample::NodeSample>>,
    /// Why the last heartbeat did not get through, while they fail: logged once when they
    /// start failing, and read by `/readyz`.
    heartbeat_trouble: Mutex<Option<String>>,
}

/// Runs the agent until `shutdown` completes. Jobs keep running when it stops: the next agent
/// re-adopts them.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let agent = config.agent.clone().with_context(|| {
        format!(
            "{} has no [agent] section; write one with `labpool init --dir DIR --join HOST:PORT --key FILE --name NODE`",
            config.path.display()
        )
    })?;
    let key = ClusterKey::load(&agent.key).context("cannot load the cluster key")?;
    let state_dir = &config.controller.state_dir;
    std::fs::create_dir_all(state_dir)
        .with_context(|| format!("cannot create state directory {}", state_dir.display()))?;
    let _lock = crate::socket::lock_state(state_dir, "agent.lock", "agent")?;

    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let (order_tx, order_rx) = mpsc::unbounded_channel();
    let client = SignedClient::new(key.clone(), Duration::from_secs(30));
    let node = LocalNode::start(&config, report_tx.clone())?;
    node.stager.set_peers(Arc::new(HttpPeers::new(
        client.clone(),
        node.spec.name.clone(),
    )));
    node.run_executor(&config, report_tx, order_rx)?;

    let listener = TcpListener::bind(&agent.listen).await.with_context(|| {
        format!(
            "cannot listen on {} (listen under [agent] in {})",
            agent.listen,
            config.path.display()
        )
    })?;
    let bound = listener.local_addr()?;
    let port = bound.port();
    let instance = format!("{:016x}", crate::transport::random_u64());
    let registration = Registration {
        node: node.spec.clone(),
        gpu_source: node.source.as_str().to_string(),
        isolation: node.support.clone(),
        port,
        advertise: advertised(agent.advertise.as_deref(), bound),
        heartbeat_ms: Some(agent.heartbeat.as_millis() as u64),
        instance: instance.clone(),
        version: crate::api::versions::THIS.to_string(),
        cache_dir: Some(config.cache_dir()),
        checkpoint: node.checkpoint.as_ref().map(|c| c.describe()),
    };
    let shared = Arc::new(Shared {
        node: node.spec.name.clone(),
        instance,
        join: agent.join.clone(),
        client: client.clone(),
        registration,
        link: Mutex::new(None),
        registering: tokio::sync::Mutex::new(()),
        orders: order_tx,
        cache: node.stager.cache().clone(),
        spool: config.spool_dir(),
        samples: Mutex::new(std::collections::VecDeque::new()),
        heartbeat_trouble: Mutex::new(None),
    });
    tokio::spawn(keep_samples(shared.clone(), node.gpu_samples.clone()));
    serve_node_metrics(&config, &shared, node.gpu_samples.clone()).await;

    let verifier: SharedVerifier = Arc::new(Mutex::new(Verifier::new(
        key,
        config.controller.max_clock_skew.as_millis() as u64,
    )));
    let copies = Router::new()
        .route("/v1/agent/copy/list", get(copy_host::list))
        .route(
            "/v1/agent/copy/file",
            get(copy_host::get)
                .post(copy_host::put)
                .delete(copy_host::delete),
        )
        .with_state(copy_host::CopyHost(agent.snapshot_copy.clone()));
    let ports = Router::new()
        .route("/v1/agent/forward", get(crate::forward::serve))
        .with_state(Arc::new(crate::forward::JobPorts {
            spool: config.spool_dir(),
        }));
    let app = Router::new()
        .route("/v1/agent/orders", post(take_orders))
        .route("/v1/peer/manifest", get(peer_manifest))
        .route("/v1/peer/whole", post(peer_whole))
        .route("/v1/peer/delta", post(peer_delta))
        .with_state(shared.clone())
        .merge(copies)
        .merge(ports)
        // verify_signed holds each route to its own limit (signed_body_limit): axum's 2 MiB
        // default must not refuse a pack on its way to this node's copy, or a batch of orders.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(
            verifier,
            verify_signed,
        ));
    tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });

    let socket = crate::socket::bind_socket(&config.controller.socket)?;
    let relay = crate::cli_relay::CliRelay {
        client: shared.client.clone(),
        join: shared.join.clone(),
        node: shared.node.clone(),
    };
    let forward = Router::new()
        .fallback(crate::cli_relay::relay)
        .with_state(Arc::new(relay));
    tokio::spawn(async move {
        let _ = axum::serve(
            socket,
            forward.into_make_service_with_connect_info::<Peer>(),
        )
        .await;
    });

    // The first registration says at once what is wrong with a key or a clock.
    register_first(&shared, &agent).await?;
    tokio::spawn(send_reports(shared.clone(), report_rx));
    tokio::spawn(heartbeat(shared.clone(), agent.heartbeat));
    tracing::info!(
        node = %shared.node,
        controller = %agent.join,
        port,
        socket = %config.controller.socket.display(),
        "labpool agent ready"
    );
    shutdown.await;
    let _ = std::fs::remove_file(&config.controller.socket);
    tracing::info!("agent stopped; running jobs continue under their shims");
    Ok(())
}

/// Registers, waiting for a controller that is not up yet; a refused key or clock ends the
/// agent with the controller's reason, since waiting cannot fix either.
async fn register_first(shared: &Arc<Shared>, agent: &AgentConfig) -> anyhow::Result<()> {
    let mut warned = false;
    let refused = |e: &CallError| e.is_auth() || e.status() == Some(409);
    (|| register(shared))
        .retry(backoff(Duration::from_secs(1), Duration::from_secs(1)))
        .when(|e| !refused(e))
        .notify(|e, _| {
            if !std::mem::replace(&mut warned, true) {
                tracing::warn!("cannot register yet, retrying every second: {e}");
            }
        })
        .await
        .map_err(|e| anyhow::anyhow!(e))
        .with_context(|| {
            format!(
                "the controller at {} refused node {}",
                agent.join, shared.node
            )
        })
}

async fn register(shared: &Arc<Shared>) -> Result<(), CallError> {
    let _one = shared.registering.lock().await;
    let answer: Registered = shared
        .client
        .json(&shared.join, "/v1/agent/register", &shared.registration)
        .await?;
    *shared.link.lock().expect("not poisoned") = Some((answer.link, 0));
    tracing::info!(
        node = %shared.node,
        link = answer.link,
        address = %answer.address,
        "registered with the controller"
    );
    Ok(())
}

/// Registers again after the controller said it does not know this agent.
async fn reregister(shared: &Arc<Shared>) {
    let _ = (|| register(shared))
        .retry(backoff(Duration::from_millis(200), Duration::from_secs(5)))
        .notify(|e, _| tracing::warn!("cannot register again: {e}"))
        .await;
}

/// Sends reports in order, each batch until the controller takes it.
async fn send_reports(shared: Arc<Shared>, mut reports: mpsc::UnboundedReceiver<AgentReport>) {
    let mut seq = 0;
    while let Some(first) = reports.recv().await {
        let mut batch = vec![first];
        while batch.len() < REPORT_BATCH {
            match reports.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        seq += 1;
        let body = ReportBatch {
            node: shared.node.clone(),
            instance: shared.instance.clone(),
            seq,
            reports: batch,
        };
        let mut warned = false;
        let send = || async {
            let sent = shared
                .client
                .json::<_, serde_json::Value>(&shared.join, "/v1/agent/reports", &body)
                .await;
            if let Err(e) = &sent
                && e.status() == Some(409)
            {
                reregister(&shared).await;
            }
            sent
        };
        let _ = send
            .retry(backoff(Duration::from_millis(100), Duration::from_secs(2)))
            .notify(|e, _| {
                if e.status() != Some(409) && !std::mem::replace(&mut warned, true) {
                    tracing::warn!("cannot send reports, retrying: {e}");
                }
            })
            .await;
    }
}

/// The address the controller is told to send orders to: `advertise` when set; else the
/// address the agent listens on when that is one address (`--listen 127.0.1.4:18071`); else
/// (listening on every address) none, and the controller takes the address it sees the
/// agent's connections come from, with the listening port.
pub fn advertised(advertise: Option<&str>, bound: std::net::SocketAddr) -> Option<String> {
    match advertise {
        Some(a) => Some(a.to_string()),
        None if bound.ip().is_unspecified() => None,
        None => Some(bound.to_string()),
    }
}

async fn heartbeat(shared: Arc<Shared>, every: Duration) {
    // A heartbeat that cannot get through in a few periods is late anyway: giving up on it
    // keeps the next one on time, so a restored link is noticed within a period or two.
    let client = shared
        .client
        .with_timeout((every * 4).clamp(Duration::from_secs(1), Duration::from_secs(30)));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (load, mem_available_mib) = host_load();
        let samples: Vec<_> = shared
            .samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        let beat = Heartbeat {
            sent_ms: Some(crate::transport::cluster_now_ms()),
            samples,
            node: shared.node.clone(),
            instance: shared.instance.clone(),
            running: crate::jobdir::JobDir::list(&shared.spool).map_or(0, |d| d.len() as u32),
            load,
            mem_available_mib,
        };
        match client
            .json::<_, serde_json::Value>(&shared.join, "/v1/agent/heartbeat", &beat)
            .await
        {
            Ok(_) => {
                let was = shared
                    .heartbeat_trouble
                    .lock()
                    .expect("not poisoned")
                    .take();
                if was.is_some() {
                    tracing::info!("the controller answers heartbeats again");
                }
            }
            Err(e) if e.status() == Some(409) => {
                put_back(&shared, beat.samples);
                tracing::warn!("the controller does not know this agent: registering again");
                reregister(&shared).await;
            }
            Err(e) => {
                put_back(&shared, beat.samples);
                let was = shared
                    .heartbeat_trouble
                    .lock()
                    .expect("not poisoned")
                    .replace(e.to_string());
                if was.is_none() {
                    tracing::error!("heartbeat failed: {e}");
                }
            }
        }
    }
}

/// Readings a heartbeat could not deliver go back in front of newer ones, within the cap.
fn put_back(shared: &Shared, samples: Vec<labpool_monitor::sample::NodeSample>) {
    let mut kept = shared.samples.lock().unwrap_or_else(|p| p.into_inner());
    for s in samples.into_iter().rev() {
        kept.push_front(s);
    }
    while kept.len() > SAMPLES_KEPT {
        kept.pop_front();
    }
}

/// Queues every new GPU reading for the next heartbeat.
async fn keep_samples(shared: Arc<Shared>, mut latest: crate::embedded::Samples) {
    while latest.changed().await.is_ok() {
        let Some(s) = latest.borrow_and_update().clone() else {
            continue;
        };
        let mut kept = shared.samples.lock().unwrap_or_else(|p| p.into_inner());
        kept.push_back(s);
        while kept.len() > SAMPLES_KEPT {
            kept.pop_front();
        }
    }
}

/// This node's `/metrics`: its GPUs under dcgm-exporter's names, labelled with the jobs whose
/// processes are on them; and `/readyz`: ready while registered with the controller and its
/// heartbeats get through.
async fn serve_node_metrics(
    config: &Config,
    shared: &Arc<Shared>,
    latest: crate::embedded::Samples,
) {
    let Some(addr) = config.metrics.address() else {
        return;
    };
    let name = shared.node.clone();
    let render = Arc::new(move || crate::gpu_sampler::render_node(&name, &latest.borrow()));
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    // The listener lives as long as the agent: the sender is leaked with it.
    std::mem::forget(_stop_tx);
    let on = shared.clone();
    let ready: crate::metrics_http::Readiness = Arc::new(move || {
        let answer = readiness(&on);
        Box::pin(async move { answer })
    });
    if let Some(bound) = crate::metrics_http::serve(addr, &config.path, render, ready, stop).await {
        crate::metrics_http::record_address(&config.controller.state_dir, bound);
    }
}

/// Ready for work: registered with the controller, and its last heartbeat got through.
fn readiness(shared: &Shared) -> Result<(), String> {
    if shared.link.lock().expect("not poisoned").is_none() {
        return Err(format!(
            "not registered with the controller at {} yet; see this agent's log",
            shared.join
        ));
    }
    match shared
        .heartbeat_trouble
        .lock()
        .expect("not poisoned")
        .as_ref()
    {
        Some(e) => Err(format!(
            "heartbeats to the controller at {} fail: {e}",
            shared.join
        )),
        None => Ok(()),
    }
}

/// The 1-minute load average and available memory, from /proc.
fn host_load() -> (f64, u64) {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib / 1024);
    (load, mem)
}

/// `POST /v1/agent/orders`: orders from the controller, on the current link only.
async fn take_orders(
    State(shared): State<Arc<Shared>>,
    signed: axum::Extension<crate::transport::Signed>,
    body: Bytes,
) -> Response {
    if signed.uid.is_some() {
        return error_response(
            StatusCode::FORBIDDEN,
            "orders come from the controller, not from a forwarded request".into(),
            None,
        );
    }
    let batch: OrderBatch = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                format!("bad order batch: {e}"),
                None,
            );
        }
    };
    let mut link = shared.link.lock().expect("not poisoned");
    match *link {
        Some((current, last)) if current == batch.link => {
            if batch.seq > last {
                for order in batch.orders {
                    let _ = shared.orders.send(order);
                }
                *link = Some((current, batch.seq));
            }
            axum::Json(serde_json::json!({"ok": true})).into_response()
        }
        other => error_response(
            StatusCode::CONFLICT,
            format!(
                "orders on link {} refused: node {} is registered on link {}",
                batch.link,
                shared.node,
                other.map_or_else(|| "none".to_string(), |(l, _)| l.to_string())
            ),
            Some("the controller sends again on the current link".into()),
        ),
    }
}

fn cache_error_response(e: labpool_cache::CacheError) -> Response {
    error_response(StatusCode::NOT_FOUND, e.to_string(), None)
}

/// `GET /v1/peer/manifest?name=&version=`: a complete version's staged manifest.
async fn peer_manifest(State(shared): State<Arc<Shared>>, Query(q): Query<PeerQuery>) -> Response {
    let cache = shared.cache.clone();
    match tokio::task::spawn_blocking(move || cache.serve_manifest(&q.name, &q.version)).await {
        Ok(Ok(m)) => axum::Json(m).into_response(),
        Ok(Err(e)) => cache_error_response(e),
        Err(e) => error_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}

/// `POST /v1/peer/whole?name=&version=&path=`: one file, whole.
async fn peer_whole(State(shared): State<Arc<Shared>>, Query(q): Query<PeerQuery>) -> Response {
    let cache = shared.cache.clone();
    let path = q.path.unwrap_or_default();
    match tokio::task::spawn_blocking(move || cache.serve_whole(&q.name, &q.version, &path)).await {
        Ok(Ok(bytes)) => bytes.into_response(),
        Ok(Err(e)) => cache_error_response(e),
        Err(e) => error_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}

/// `POST /v1/peer/delta?name=&version=&path=` with the receiver's signature: the delta.
async fn peer_delta(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<PeerQuery>,
    signature: Bytes,
) -> Response {
    let cache = shared.cache.clone();
    let path = q.path.unwrap_or_default();
    match tokio::task::spawn_blocking(move || {
        cache.serve_delta(&q.name, &q.version, &path, &signature)
    })
    .await
    {
        Ok(Ok(bytes)) => bytes.into_response(),
        Ok(Err(e)) => cache_error_response(e),
        Err(e) => error_response(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}
