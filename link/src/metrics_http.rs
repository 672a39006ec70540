//! The `/metrics` listener, for the controller (the whole pool) and for `labpool agent` (its
//! node). It serves `GET /metrics`, read-only like dcgm-exporter's, and the health checks that
//! supervisors and monitors ask (Slurm 25.11's names): `/livez` (the daemon answers) and
//! `/readyz` (it is ready for work: 200, or 503 with why not). A port that cannot be bound is
//! logged with the fix and the daemon runs on, since metrics must never stop jobs.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;

/// Whether the daemon is ready for work: `Ok`, or what is missing. Asked at each `/readyz`.
pub type Readiness =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// How long `/readyz` waits for the daemon's answer before it says not ready.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `render()` at `http://ADDR/metrics`, `/livez` and `/readyz` (from `ready`) until
/// `stop`. Returns the bound address, or None when it could not bind (logged).
pub async fn serve(
    addr: &str,
    config_path: &std::path::Path,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    ready: Readiness,
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
    let app = Router::new()
        .route("/livez", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    match tokio::time::timeout(READY_WITHIN, ready()).await {
                        Ok(Ok(())) => (StatusCode::OK, "ok\n".to_string()),
                        Ok(Err(why)) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("not ready: {why}\n"),
                        ),
                        Err(_) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("not ready: no answer within {} s\n", READY_WITHIN.as_secs()),
                        ),
                    }
                }
            }),
        )
        .route(
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
