//! The order link to one remote agent: batches sent in order, each retried until taken.

use crate::api::agent::{AgentOrder, OrderBatch};
use crate::transport::SignedClient;
use std::time::Duration;
use tokio::sync::mpsc;

/// Most orders in one batch.
const ORDER_BATCH: usize = 256;

/// Opens an order link to the agent at `address`: orders sent on the returned channel go out
/// in order, in batches, each retried until the agent takes it or the link is dropped (a new
/// registration, or the node went DOWN).
pub fn spawn_link(
    node: String,
    address: String,
    client: SignedClient,
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
            let mut backoff = Duration::from_millis(50);
            let mut warned = false;
            loop {
                if rx.is_closed() {
                    return;
                }
                match client
                    .call(&address, "POST", "/v1/agent/orders", None, body.clone())
                    .await
                {
                    Ok(_) => break,
                    Err(e) => {
                        // The first orders of a link may arrive before the agent has read its
                        // registration answer: only a refusal that lasts is worth a warning.
                        if !warned && backoff >= Duration::from_millis(400) {
                            tracing::warn!(node, address, "cannot send orders, retrying: {e}");
                            warned = true;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                }
            }
        }
    });
    (link, tx)
}
