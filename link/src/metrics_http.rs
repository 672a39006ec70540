//! The `/metrics` listener, for the controller (the whole pool) and for `labpool agent` (its
//! node). It serves only `GET /metrics`, read-only like dcgm-exporter's; a port that cannot be
//! bound is logged with the fix and the daemon runs on, since metrics must never stop jobs.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use std::sync::Arc;
use tokio::sync::watch;

/// Serves `render()` at `http://ADDR/metrics` until `stop`. Returns the bound address, or None
/// when it could not bind (logged).
pub async fn serve(
    addr: &str,
    config_path: &std::path::Path,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    mut stop: watch::Receiver<bool>,
) -> Option<std::net::SocketAddr> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(
                "cannot serve metrics on {addr}: {e}; set listen under [metrics] in {} to a free port, or \"off\"",
                config_path.display()
            );
            return None;
        }
    };
    let bound = listener.local_addr().ok()?;
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let render = render.clone();
            async move {
                let text = tokio::task::spawn_blocking(move || render())
                    .await
                    .unwrap_or_default();
                (
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    text,
                )
                    .into_response()
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
    });
    tracing::info!(listen = %bound, "serving /metrics");
    Some(bound)
}

/// Writes the bound address to `STATE_DIR/metrics.addr`, so that a port chosen by the system
/// (`:0`) can be found by scripts and tests.
pub fn record_address(state_dir: &std::path::Path, addr: std::net::SocketAddr) {
    let path = state_dir.join("metrics.addr");
    if let Err(e) = std::fs::write(&path, format!("{addr}\n")) {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}
