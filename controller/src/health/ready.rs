//! The controller's `/readyz`: ready for work while its engine answers and its state file
//! system takes writes. A supervisor or a load balancer reads 503 with the reason otherwise.

use crate::engine::request::Request;
use crate::metrics_http::Readiness;
use crate::storage::StorageGate;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Asks, at each `/readyz`: is new work refused (the state file system is full), and does the
/// engine answer a read (a `nodes` listing) at all. The listener bounds the wait.
pub fn readiness(engine: mpsc::Sender<Request>, storage: StorageGate) -> Readiness {
    Arc::new(move || {
        let (engine, storage) = (engine.clone(), storage.clone());
        Box::pin(async move {
            if let Some(why) = storage.refused() {
                return Err(format!("new work is refused: {why}"));
            }
            let (reply, answer) = oneshot::channel();
            engine
                .send(Request::Nodes { reply })
                .await
                .map_err(|_| "the engine has stopped; see the controller's log".to_string())?;
            answer
                .await
                .map(|_| ())
                .map_err(|_| "the engine dropped the request; see the controller's log".into())
        })
    })
}
