//! `labpool cache verify`: a verify sent to nodes, answered once every node has reported.

use crate::api::agent::AgentOrder;
use crate::api::data::VerifiedVersion;
use crate::datasets::errors::{admin_only, unknown_node};
use crate::engine::Engine;
use crate::error::ApiError;
use labpool_cache::store::VerifyReport;
use std::collections::BTreeSet;
use std::path::PathBuf;
use tokio::sync::oneshot;

/// A verify waiting for its nodes.
pub(super) struct PendingVerify {
    pub(super) waiting: BTreeSet<String>,
    pub(super) done: Vec<VerifiedVersion>,
    pub(super) reply: oneshot::Sender<Result<Vec<VerifiedVersion>, ApiError>>,
}

impl Engine {
    /// Starts a verify of one node's cache, or every node's; the answer comes when all have
    /// reported.
    pub(crate) fn start_verify(
        &mut self,
        node: Option<&str>,
        admin: bool,
        reply: oneshot::Sender<Result<Vec<VerifiedVersion>, ApiError>>,
    ) {
        if !admin {
            let _ = reply.send(Err(admin_only("cache verify")));
            return;
        }
        if let Some(n) = node
            && !self.sched.nodes().any(|x| x.name() == n)
        {
            let _ = reply.send(Err(unknown_node(n, &self.sched)));
            return;
        }
        let nodes: BTreeSet<String> = self
            .reach
            .agent_nodes()
            .filter(|n| node.is_none_or(|want| want == *n))
            .map(str::to_string)
            .collect();
        // Mismatched files are re-staged from the source only while it still holds that
        // version; otherwise the version is reported and left for eviction.
        let sources: Vec<((String, String), PathBuf)> = self
            .data
            .datasets
            .values()
            .map(|d| ((d.name.clone(), d.current.clone()), d.path.clone()))
            .collect();
        self.data.next_request += 1;
        let request = self.data.next_request;
        for n in &nodes {
            if let Some(link) = self.reach.orders(n) {
                let _ = link.send(AgentOrder::Verify {
                    request,
                    sources: sources.clone(),
                });
            }
        }
        self.data.verifies.insert(
            request,
            PendingVerify {
                waiting: nodes,
                done: Vec::new(),
                reply,
            },
        );
    }

    /// A node finished a verify.
    pub(crate) fn on_verified(
        &mut self,
        node: String,
        request: u64,
        result: Result<Vec<(String, String, VerifyReport)>, String>,
    ) {
        let Some(mut pending) = self.data.verifies.remove(&request) else {
            return;
        };
        pending.waiting.remove(&node);
        match result {
            Ok(versions) => pending
                .done
                .extend(
                    versions
                        .into_iter()
                        .map(|(name, version, r)| VerifiedVersion {
                            node: node.clone(),
                            name,
                            version,
                            files: r.files,
                            mismatched: r.mismatched,
                            repaired: r.repaired,
                        }),
                ),
            Err(e) => {
                let _ = pending.reply.send(Err(ApiError::internal(format!(
                    "verify on {node} failed: {e}"
                ))));
                return;
            }
        }
        if pending.waiting.is_empty() {
            let _ = pending.reply.send(Ok(pending.done));
        } else {
            self.data.verifies.insert(request, pending);
        }
    }
}
