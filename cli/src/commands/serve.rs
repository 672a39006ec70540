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
    tokio::spawn(agent_hangups(config.path.clone()));
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

/// An agent reads its config only at start; a SIGHUP (which would otherwise end it) is answered
/// in the log with how to apply a change.
async fn agent_hangups(path: std::path::PathBuf) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        return;
    };
    while hangups.recv().await.is_some() {
        tracing::warn!(
            "SIGHUP: a node agent reads {} only at its start; restart it to apply a change (systemctl restart labpool-agent; running jobs stay)",
            path.display()
        );
    }
}
