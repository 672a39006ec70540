//! The order link to one remote agent: batches sent in order, each retried until taken.

use crate::api::agent::{AgentOrder, OrderBatch};
use crate::retry::backoff;
use crate::transport::SignedClient;
use backon::Retryable;
use std::time::Duration;
use tokio::sync::mpsc;

/// Most orders in one batch.
const ORDER_BATCH: usize = 256;

/// Opens an order link to the agent at `address`: orders sent on the returned channel go out
/// in order, in batches, each retried until the agent takes it or the link is dropped (a new
/// registration, or the node went DOWN).
///
/// While a batch fails to arrive past the first few retries, `trouble` holds the error (the
/// engine shows the node not responding); a batch taken marks it delivered and clears it.
pub fn spawn_link(
    node: String,
    address: String,
    client: SignedClient,
    trouble: super::LinkTrouble,
) -> (u64, mpsc::UnboundedSender<AgentOrder>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<AgentOrder>();
    // 53 bits: the id survives a JSON round trip through any parser.
    let link = crate::transport::random_u64() >> 11;
    tokio::spawn(async move {
        let mut seq = 0;
        while let Some(first) = rx.recv().await {
            let mut orders = vec![first];
            while orders.len() < ORDER_BATCH {
                match rx.try_recv() {
                    Ok(o) => orders.push(o),
                    Err(_) => break,
                }
            }
            seq += 1;
            let body =
                serde_json::to_vec(&OrderBatch { link, seq, orders }).expect("orders serialise");
            if rx.is_closed() {
                return;
            }
            let mut warned = false;
            let sent = (|| client.call(&address, "POST", "/v1/agent/orders", None, body.clone()))
                .retry(backoff(Duration::from_millis(50), Duration::from_secs(2)))
                // A closed channel means a newer link took over: these orders are its now.
                .when(|_| !rx.is_closed())
                .notify(|e, wait| {
                    // The first orders of a link may arrive before the agent has read its
                    // registration answer: only a refusal that lasts is worth a warning.
                    if wait >= Duration::from_millis(400) {
                        trouble.lock().unwrap_or_else(|p| p.into_inner()).error =
                            Some(e.to_string());
                        if !std::mem::replace(&mut warned, true) {
                            tracing::warn!(node, address, "cannot send orders, retrying: {e}");
                        }
                    }
                })
                .await;
            if sent.is_err() {
                return;
            }
            *trouble.lock().unwrap_or_else(|p| p.into_inner()) = super::LinkState {
                delivered: true,
                error: None,
            };
        }
    });
    (link, tx)
}
