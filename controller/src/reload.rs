//! SIGHUP (what `systemctl reload labpool` sends): the controller reads its config file
//! again. The scheduling policy (partitions, credits, priority, preemption) changes at once;
//! each other section that changed is named in the log with why it waits for a restart. A
//! file that does not load changes nothing, and the log says why.

use crate::engine::request::Request;
use crate::settings::Config;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{mpsc, oneshot, watch};

/// Reloads `path` at each SIGHUP until `stop`; each config the engine took goes to `reloaded`
/// (an engine rebuilt after a full state disk starts from it).
pub async fn on_hangup(
    hangups: Option<Signal>,
    path: PathBuf,
    engine: mpsc::Sender<Request>,
    reloaded: watch::Sender<Arc<Config>>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(mut hangups) = hangups else {
        return;
    };
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            got = hangups.recv() => if got.is_none() { return },
        }
        if let Some(config) = reload(&path, &engine).await {
            let _ = reloaded.send(config);
        }
    }
}

/// Takes SIGHUP from now on (queued until [`on_hangup`] reads it); `None`, said in the log,
/// where no handler can be set.
pub fn hangups() -> Option<Signal> {
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("no SIGHUP handler ({e}): the config is reloaded only by a restart");
            None
        }
    }
}

/// One reload, reported in the log; the engine's config after it, when it took anything.
pub async fn reload(path: &std::path::Path, engine: &mpsc::Sender<Request>) -> Option<Arc<Config>> {
    let file = path.display();
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("config reload: kept the running config, as {file} does not load: {e}");
            return None;
        }
    };
    let (reply, answer) = oneshot::channel();
    let asked = engine
        .send(Request::Reload {
            config: Box::new(config),
            reply,
        })
        .await;
    let (changes, now) = match (asked, answer.await) {
        (Ok(()), Ok(Ok(done))) => done,
        (Ok(()), Ok(Err(why))) => {
            tracing::error!("config reload: kept the running config: {why}");
            return None;
        }
        _ => {
            tracing::error!("config reload: the engine is not answering; nothing was reloaded");
            return None;
        }
    };
    if changes.live.is_empty() && changes.at_restart.is_empty() {
        tracing::info!("config reload: {file} is unchanged");
    }
    if !changes.live.is_empty() {
        tracing::info!(
            "config reload: took [{}] from {file}; they apply to the next job and the next pass",
            changes.live.join("], [")
        );
    }
    for (section, why) in &changes.at_restart {
        tracing::warn!(
            "config reload: [{section}] changed in {file} but takes effect at the next restart, as {why} (systemctl restart labpool; running jobs stay)"
        );
    }
    Some(now)
}
