//! `labpool serve` and `labpool agent`.

use crate::settings::Config;

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
    crate::logging::init(&config.controller, true)?;
    crate::agent::daemon::run(config, stop_signal()).await
}

/// Runs `labpool serve`.
pub async fn run(mut config: Config) -> anyhow::Result<()> {
    crate::logging::init(&config.controller, true)?;
    let path = config.path.clone();
    match config.alerts.resolve_webhook(&path) {
        Ok(Some(warning)) => tracing::warn!("{warning}"),
        Ok(None) => {}
        Err(e) => anyhow::bail!(e),
    }
    crate::controller::serve(config, crate::agent::node::start_embedded, stop_signal()).await
}
