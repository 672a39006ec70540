//! `labpool serve`: the controller. It holds the state database, runs the scheduler through
//! the [`engine`], serves the API on a Unix socket, and, in the embedded default, runs the
//! local node's agent in-process. Its executors are the node agents (over the signed links, or
//! in-process through `labpool_link::embedded`) and, in front of a lab's Slurm, the
//! [`slurm_gate`]; the off-box copies of the snapshots go through [`snapshot_copies`].
//!
//! It is a crate of its own over the wire types, the links and the dashboard, and never
//! depends on the agent: the binary hands it the agent's start function.

// The paths these files were written with, from when they were modules of the binary.
use labpool_api as api;
use labpool_host::{atomic_file, clock, discovery, env_vars, identity, retry};
use labpool_link::{embedded, http1, link_auth, metrics_http, socket, transport, tunnel, webhook};
use labpool_settings as settings;
use labpool_settings::schedule;
use labpool_web as web;

pub mod accounts;
pub mod datasets;
pub mod db;
pub mod engine;
pub mod envs;
pub mod error;
pub mod health;
pub mod http;
pub mod jobs;
pub mod models;
pub mod nodes;
pub mod quotas;
pub mod reload;
pub mod reports;
pub mod reservations;
pub mod schema;
pub mod slurm_gate;
pub mod snapshot_copies;
pub mod snapshots;
pub mod state_backup;
pub mod storage;
pub mod supervisor;
pub mod timers;
pub mod web_login;

use crate::clock::now_ms;
use crate::db::Db;
use crate::engine::NodeFacts;
use crate::http::{AppState, Peer};
use crate::settings::Config;
use crate::socket::{bind_socket, lock_state};
use crate::transport::{SharedVerifier, SignedClient, verify_signed};
use anyhow::Context;
use labpool_isolation::Support;
use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// Runs the controller until `shutdown` completes. Jobs keep running when it stops: their shims
/// own them, and the next controller re-adopts them. With `local_node`, `start_embedded` starts
/// the in-process node (the binary passes the agent's).
pub async fn serve(
    config: Config,
    start_embedded: crate::embedded::StartEmbedded,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // SIGHUP is taken first: a `systemctl reload` during a long migration below must not end
    // the controller (systemd counts an end by SIGHUP as clean, and would not restart it).
    let hangups = reload::hangups();
    let config = Arc::new(config);
    let clock = crate::clock::system();
    let state_dir = &config.controller.state_dir;
    // Traversable (jobs reach their scripts in the spool below it) but not listable; the
    // database inside is private to the controller's user.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(state_dir)
        .with_context(|| format!("cannot create state directory {}", state_dir.display()))?;
    std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o711))
        .with_context(|| format!("cannot set the mode of {}", state_dir.display()))?;
    let _lock = lock_state(state_dir, "controller.lock", "controller")?;
    if !nix::unistd::geteuid().is_root() {
        let me = crate::identity::user_name(crate::identity::effective_uid());
        tracing::warn!(
            "not running as root: only {me}'s jobs can run here; other users are refused at submit"
        );
    }
    if let Some(problem) = crate::identity::admin_group_problem(&config.controller.admin_group) {
        tracing::warn!("{problem}");
    }
    let db = Db::open(&config.database_path()).await?;

    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let mut agents = BTreeMap::new();
    let mut nodes = BTreeMap::new();
    let mut local_name = None;
    let mut local_spec = None;
    let mut local_samples = None;
    let mut local_ports = None;
    // What environment builds use: the local node's findings, or the controller's own.
    let (support, tools) = if config.controller.local_node {
        let node = start_embedded(&config, report_tx.clone())?;
        db.upsert_node(&node.spec, &node.gpu_source, now_ms())
            .await?;
        agents.insert(node.spec.name.clone(), node.orders.clone());
        nodes.insert(
            node.spec.name.clone(),
            NodeFacts {
                gpu_source: node.gpu_source.clone(),
                isolation: node.support.clone(),
                cache_dir: Some(config.cache_dir()),
                checkpoint: node.checkpoint.clone(),
            },
        );
        local_name = Some(node.spec.name.clone());
        local_samples = Some(node.samples.clone());
        local_ports = Some((node.spec.name.clone(), node.ports.clone()));
        local_spec = Some(node.spec.clone());
        (node.support.clone(), node.tools.clone())
    } else {
        (
            Support::off(),
            labpool_envs::tools::Tools::detect(config.envs.python.clone()),
        )
    };
    let cluster_key = match &config.controller.listen {
        Some(_) => {
            let path = config.cluster_key_path();
            Some(labpool_cluster::ClusterKey::load(&path).with_context(|| {
                format!(
                    "listen is set under [controller] in {}, so agents' requests are checked with the cluster key, which cannot be used; `labpool init --dir DIR` writes one",
                    config.path.display()
                )
            })?)
        }
        None => None,
    };

    let storage = storage::StorageGate::default();
    let gpu_util = health::UtilBoard::default();
    let (request_tx, request_rx) = mpsc::channel(4096);
    let gate = crate::slurm_gate::spawn(
        &config,
        clock.clone(),
        report_tx.clone(),
        request_tx.clone(),
    );
    let parts = supervisor::EngineParts {
        config: config.clone(),
        db: db.clone(),
        agents,
        nodes,
        local: local_spec,
        cluster: cluster_key
            .clone()
            .map(|k| SignedClient::new(k, std::time::Duration::from_secs(30))),
        clock: clock.clone(),
        storage: storage.clone(),
        gpu_util: gpu_util.clone(),
        gate,
    };
    let engine = parts.build().await?;

    let listener = bind_socket(&config.controller.socket)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (reloaded_tx, reloaded_rx) = watch::channel(config.clone());
    tokio::spawn(reload::on_hangup(
        hangups,
        config.path.clone(),
        request_tx.clone(),
        reloaded_tx,
        stop_rx.clone(),
    ));
    let snapshot_service = snapshots::SnapshotService::new(config.clone());
    let quota_service = quotas::QuotaService::new(config.clone(), db.clone());
    let env_service = envs::EnvService::new(config.clone(), db.clone(), support, tools);
    let monitor_service = health::MonitorService::new(
        config.clone(),
        db.clone(),
        request_tx.clone(),
        clock.clone(),
        gpu_util,
        Some(quota_service.clone()),
    );
    if let (Some(name), Some(samples)) = (&local_name, local_samples) {
        tokio::spawn(health::feed(monitor_service.clone(), name.clone(), samples));
    }
    tokio::spawn(health::run(monitor_service.clone(), stop_rx.clone()));
    if let Some(addr) = config.metrics.address() {
        let m = monitor_service.clone();
        let render = Arc::new(move || health::metrics::render(&m));
        let ready = health::readiness(request_tx.clone(), storage.clone());
        if let Some(bound) =
            crate::metrics_http::serve(addr, &config.path, render, ready, stop_rx.clone()).await
        {
            crate::metrics_http::record_address(state_dir, bound);
        }
    }
    let app_state = AppState {
        live: reloaded_rx.clone(),
        engine: request_tx,
        db: db.clone(),
        config: config.clone(),
        snapshots: snapshot_service.clone(),
        quotas: quota_service.clone(),
        envs: env_service,
        storage,
        monitor: monitor_service,
        tunnels: Arc::new(crate::jobs::forward::Tunnels {
            local: local_ports,
            cluster: cluster_key
                .clone()
                .map(|k| SignedClient::new(k, std::time::Duration::from_secs(30))),
        }),
        logins: Arc::new(crate::web::auth::Logins::new(
            config.web.login_token_lifetime,
            config.web.session_lifetime,
        )),
    };
    let app = http::router(app_state.clone());
    if let Some(addr) = config.web.address() {
        let web = crate::web::WebState {
            api: crate::web::api_call::Api::new(http::router(app_state.clone())),
            logins: app_state.logins.clone(),
            config: config.clone(),
            tunnels: Arc::new(crate::jobs::forward::MemberTunnels(app_state.clone())),
            notebooks: Arc::default(),
        };
        crate::web::serve(addr, web, state_dir, stop_rx.clone()).await;
    }
    // Agents' own routes, and the members' API forwarded by agents (caller: the vouched uid).
    let agent_state = app_state.clone();
    let agent_api = http::router(app_state);
    let mut server_stop = stop_rx.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<Peer>())
            .with_graceful_shutdown(async move {
                let _ = server_stop.wait_for(|s| *s).await;
            })
            .await
    });
    tokio::spawn(
        snapshots::timers(snapshot_service, db.clone(), clock.clone()).run(stop_rx.clone()),
    );
    tokio::spawn(quotas::timers(quota_service, clock.clone()).run(stop_rx.clone()));
    if let (Some(addr), Some(key)) = (&config.controller.listen, cluster_key) {
        let tcp = tokio::net::TcpListener::bind(addr).await.with_context(|| {
            format!(
                "cannot listen for agents on {addr} (listen under [controller] in {})",
                config.path.display()
            )
        })?;
        let verifier: SharedVerifier =
            Arc::new(std::sync::Mutex::new(labpool_cluster::Verifier::new(
                key,
                config.controller.max_clock_skew.as_millis() as u64,
            )));
        // verify_signed holds each route to its own limit (signed_body_limit): axum's 2 MiB
        // default must not cut a batch of reports short first.
        let agent_app = nodes::routes()
            .with_state(agent_state)
            .merge(agent_api)
            .layer(axum::extract::DefaultBodyLimit::disable())
            .layer(axum::middleware::from_fn_with_state(
                verifier,
                verify_signed,
            ));
        let mut tcp_stop = stop_rx.clone();
        tokio::spawn(async move {
            axum::serve(
                tcp,
                agent_app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
            .with_graceful_shutdown(async move {
                let _ = tcp_stop.wait_for(|s| *s).await;
            })
            .await
        });
        tracing::info!(listen = %addr, "taking node agents");
    }
    let mut engine_task = tokio::spawn(supervisor::run(
        parts,
        engine,
        supervisor::Channels {
            requests: request_rx,
            reports: report_rx,
            shutdown: stop_rx,
            reloaded: reloaded_rx,
        },
    ));
    tracing::info!(
        socket = %config.controller.socket.display(),
        node = local_name.as_deref().unwrap_or("-"),
        "labpool controller ready"
    );

    let engine_result = tokio::select! {
        _ = shutdown => None,
        r = &mut engine_task => Some(r),
    };
    let _ = stop_tx.send(true);
    let engine_result = match engine_result {
        Some(r) => r,
        None => engine_task.await,
    };
    let _ = server.await;
    let _ = std::fs::remove_file(&config.controller.socket);
    engine_result.context("the engine task panicked")??;
    tracing::info!("controller stopped; running jobs continue under their shims");
    Ok(())
}
