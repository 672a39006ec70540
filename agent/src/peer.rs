//! Staging from a peer: a node that holds a dataset version another node needs serves its
//! files over its agent's signed HTTP (`/v1/peer/*`), so several nodes starting on one dataset
//! do not all read the shared file server. The cache crate does the rest: it prefers the peer,
//! checks every file against the manifest's BLAKE3, and goes back to the shared source when
//! the peer fails.

use crate::api::agent::{PeerQuery, PeerRef};
use crate::transport::SignedClient;
use labpool_cache::manifest::Manifest;
use labpool_cache::peer::PeerSource;
use std::io;
use std::sync::Arc;
use std::time::Duration;

/// Opens peers for the stager.
pub trait PeerConnector: Send + Sync {
    /// A source for files held by `peer`.
    fn connect(&self, peer: &PeerRef) -> Arc<dyn PeerSource>;
}

/// Peers reached over signed HTTP.
pub struct HttpPeers {
    client: SignedClient,
    handle: tokio::runtime::Handle,
    me: String,
}

impl HttpPeers {
    /// Peers called with `client` from the runtime this is created in; `me` is this node.
    pub fn new(client: SignedClient, me: String) -> HttpPeers {
        HttpPeers {
            client: client.with_timeout(Duration::from_secs(600)),
            handle: tokio::runtime::Handle::current(),
            me,
        }
    }
}

impl PeerConnector for HttpPeers {
    fn connect(&self, peer: &PeerRef) -> Arc<dyn PeerSource> {
        Arc::new(HttpPeer {
            client: self.client.clone(),
            handle: self.handle.clone(),
            peer: peer.clone(),
            me: self.me.clone(),
        })
    }
}

struct HttpPeer {
    client: SignedClient,
    handle: tokio::runtime::Handle,
    peer: PeerRef,
    me: String,
}

/// `name=..&version=..[&path=..]`, form-encoded as the agent's `Query` extractor reads it.
fn query(name: &str, version: &str, path: Option<&str>) -> String {
    serde_urlencoded::to_string(PeerQuery {
        name: name.to_string(),
        version: version.to_string(),
        path: path.map(str::to_string),
    })
    .expect("strings encode")
}

impl HttpPeer {
    fn call(&self, method: &str, path: String, body: Vec<u8>) -> io::Result<Vec<u8>> {
        // The stager's copy threads are not runtime threads: blocking on the call is fine.
        self.handle
            .block_on(
                self.client
                    .call(&self.peer.address, method, &path, None, body),
            )
            .map(|(_, bytes)| bytes)
            .map_err(|e| {
                io::Error::other(format!("peer {} (for {}): {e}", self.peer.node, self.me))
            })
    }
}

impl PeerSource for HttpPeer {
    fn name(&self) -> &str {
        &self.peer.node
    }

    fn manifest(&self, name: &str, version: &str) -> io::Result<Manifest> {
        let bytes = self.call(
            "GET",
            format!("/v1/peer/manifest?{}", query(name, version, None)),
            Vec::new(),
        )?;
        serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn whole(&self, name: &str, version: &str, path: &str) -> io::Result<Vec<u8>> {
        self.call(
            "POST",
            format!("/v1/peer/whole?{}", query(name, version, Some(path))),
            Vec::new(),
        )
    }

    fn delta(
        &self,
        name: &str,
        version: &str,
        path: &str,
        signature: &[u8],
    ) -> io::Result<Vec<u8>> {
        self.call(
            "POST",
            format!("/v1/peer/delta?{}", query(name, version, Some(path))),
            signature.to_vec(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_round_trip_through_the_form_encoding() {
        let q = query("imagenet", "ab12", Some("train/a b&c=%.jpg"));
        assert!(!q.contains(' ') && !q.contains("&c="), "{q}");
        let back: PeerQuery = serde_urlencoded::from_str(&q).unwrap();
        assert_eq!(back.path.as_deref(), Some("train/a b&c=%.jpg"));
        assert_eq!(query("d", "v", None), "name=d&version=v");
    }
}
