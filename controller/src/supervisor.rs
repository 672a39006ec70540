//! Runs the engine, and runs a new one when the state file system filled up: the API stays up
//! and says what is full, and once a write goes through again a fresh engine reloads the state
//! from the database (as after a restart) and takes work. See [`crate::storage`].

use crate::api::agent::{AgentOrder, AgentReport};
use crate::clock::Clock;
use crate::db::Db;
use crate::engine::{Engine, NodeFacts, Request};
use crate::settings::Config;
use crate::storage::{self, StorageGate};
use crate::transport::SignedClient;
use labpool_scheduler::Scheduler;
use labpool_scheduler::node::NodeSpec;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// What an engine is made of, kept to make a new one.
pub struct EngineParts {
    /// The config.
    pub config: Arc<Config>,
    /// The database.
    pub db: Db,
    /// Order links to the nodes known at start (the in-process node).
    pub agents: BTreeMap<String, mpsc::UnboundedSender<AgentOrder>>,
    /// What is known of those nodes.
    pub nodes: BTreeMap<String, NodeFacts>,
    /// The in-process node's spec, when there is one.
    pub local: Option<NodeSpec>,
    /// The client for order links to remote agents.
    pub cluster: Option<SignedClient>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Shared with the API: why no work is taken, while none is.
    pub storage: StorageGate,
    /// Shared with the monitor: each running attempt's mean GPU utilisation.
    pub gpu_util: crate::health::UtilBoard,
    /// The Slurm gate's order channel, over the Slurm executor.
    pub gate: Option<mpsc::UnboundedSender<crate::slurm_gate::GateOrder>>,
}

impl EngineParts {
    /// A new engine, its state loaded from the database.
    pub async fn build(&self) -> anyhow::Result<Engine> {
        let mut sched =
            Scheduler::with_policy(self.config.scheduler_partitions(), self.config.policy())?;
        if let Some(spec) = &self.local {
            sched.upsert_node(spec.clone())?;
        }
        let mut engine = Engine::new(
            self.config.clone(),
            self.db.clone(),
            sched,
            self.agents.clone(),
            self.nodes.clone(),
            self.clock.clone(),
        );
        engine.reach.local = self.local.as_ref().map(|s| s.name.clone());
        engine.reach.cluster = self.cluster.clone();
        engine.storage = self.storage.clone();
        engine.gpu_util = self.gpu_util.clone();
        engine.reach.gate = self.gate.clone();
        engine.restore().await?;
        Ok(engine)
    }
}

/// What the engine takes in, and the signals it follows.
pub struct Channels {
    /// Requests from the API and the timers.
    pub requests: mpsc::Receiver<Request>,
    /// Reports from the nodes.
    pub reports: mpsc::UnboundedReceiver<AgentReport>,
    /// Turns true to stop.
    pub shutdown: watch::Receiver<bool>,
    /// The config as last reloaded (SIGHUP).
    pub reloaded: watch::Receiver<Arc<Config>>,
}

/// Runs `engine` until `shutdown`; when it stops on a full state file system, waits for room
/// (answering requests with why meanwhile) and runs a new one.
pub async fn run(mut parts: EngineParts, engine: Engine, channels: Channels) -> anyhow::Result<()> {
    let Channels {
        mut requests,
        mut reports,
        mut shutdown,
        reloaded,
    } = channels;
    let mut engine = engine;
    loop {
        match engine
            .run(&mut requests, &mut reports, shutdown.clone())
            .await
        {
            Err(e) if storage::is_full(&e) => {}
            other => return other,
        }
        // The engine built next starts from the config as last reloaded.
        parts.config = reloaded.borrow().clone();
        let state_dir = &parts.config.controller.state_dir;
        engine = loop {
            tracing::error!(
                "{}",
                parts
                    .storage
                    .refused()
                    .unwrap_or_else(|| "the state file system is full".into())
            );
            // Wait for room. Requests meanwhile are let go: their handlers answer with why. The
            // check keeps its own clock: requests arriving more often than it (the monitor asks
            // every sample interval) must not keep putting it off.
            let mut check_at = tokio::time::Instant::now() + storage::RETRY_EVERY;
            loop {
                if *shutdown.borrow_and_update() {
                    return Ok(());
                }
                tokio::select! {
                    changed = shutdown.changed() => {
                        if changed.is_err() {
                            return Ok(());
                        }
                    }
                    Some(r) = requests.recv() => drop(r),
                    _ = tokio::time::sleep_until(check_at) => {
                        if storage::has_room(&parts.db, state_dir).await {
                            break;
                        }
                        check_at = tokio::time::Instant::now() + storage::RETRY_EVERY;
                    }
                }
            }
            match parts.build().await {
                Ok(engine) => break engine,
                Err(e) if storage::is_full(&e) => {
                    parts.storage.set(Some(storage::describe(state_dir, &e)));
                }
                Err(e) => return Err(e),
            }
        };
        parts.storage.set(None);
        tracing::info!("the state file system has room again: state reloaded, taking work");
    }
}
