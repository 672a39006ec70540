//! `labpool serve`, and logging for the daemons.

use crate::env_vars;
use crate::settings::Config;
use anyhow::Context;
use std::path::Path;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::MakeWriterExt;

/// Sends logs to standard error (when `stderr`) and to `file` (when given). The level comes
/// from `$LABPOOL_LOG` (default `info`).
pub fn init_logging(file: Option<&Path>, stderr: bool) -> anyhow::Result<()> {
    let filter =
        EnvFilter::try_from_env(env_vars::LABPOOL_LOG).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false);
    let file = match file {
        Some(path) => Some(Arc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?,
        )),
        None => None,
    };
    // try_init: a second call (the demo after a test harness, say) keeps the first subscriber.
    let _ = match (file, stderr) {
        (Some(f), true) => builder.with_writer(std::io::stderr.and(f)).try_init(),
        (Some(f), false) => builder.with_writer(f).try_init(),
        (None, _) => builder.with_writer(std::io::stderr).try_init(),
    };
    Ok(())
}

/// Waits for SIGINT or SIGTERM.
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stop signal received");
}

/// Runs `labpool agent`.
pub async fn run_agent(config: Config) -> anyhow::Result<()> {
    init_logging(config.controller.log_file.as_deref(), true)?;
    crate::agent::daemon::run(config, stop_signal()).await
}

/// Runs `labpool serve`.
pub async fn run(mut config: Config) -> anyhow::Result<()> {
    init_logging(config.controller.log_file.as_deref(), true)?;
    let path = config.path.clone();
    match config.alerts.resolve_webhook(&path) {
        Ok(Some(warning)) => tracing::warn!("{warning}"),
        Ok(None) => {}
        Err(e) => anyhow::bail!(e),
    }
    crate::controller::serve(config, crate::agent::node::start_embedded, stop_signal()).await
}
