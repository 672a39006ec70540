//! Another node's copy (`[agent] snapshot_copy` on that node) as a copy's store: its agent
//! takes the files over the signed transport between nodes.

use crate::api::agent::CopyKey;
use crate::transport::SignedClient;
use labpool_snapshots::copy::Store;
use labpool_snapshots::{Result, SnapshotError};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::runtime::Handle;

/// A node's agent, at `address`.
pub struct NodeStore {
    /// The node's name.
    pub node: String,
    /// Its agent's address, `HOST:PORT`.
    pub address: String,
    client: SignedClient,
    runtime: Handle,
}

impl NodeStore {
    /// The store on `node`, whose agent listens at `address`; requests signed by `client`.
    pub fn new(node: &str, address: &str, client: SignedClient, runtime: Handle) -> NodeStore {
        NodeStore {
            node: node.to_string(),
            address: address.to_string(),
            client: client.with_timeout(Duration::from_secs(300)),
            runtime,
        }
    }

    fn call(&self, method: &str, path: &str, body: Vec<u8>) -> Result<Vec<u8>> {
        self.runtime
            .block_on(self.client.call(&self.address, method, path, None, body))
            .map(|(_, bytes)| bytes)
            .map_err(|e| SnapshotError::Invalid(format!("{}: {e}", self.describe())))
    }

    fn file(key: &str) -> String {
        let q = serde_urlencoded::to_string(CopyKey {
            key: key.to_string(),
        })
        .expect("a key encodes");
        format!("/v1/agent/copy/file?{q}")
    }
}

impl Store for NodeStore {
    fn describe(&self) -> String {
        format!("node {} ({})", self.node, self.address)
    }

    fn list(&self) -> Result<BTreeMap<String, u64>> {
        let bytes = self.call("GET", "/v1/agent/copy/list", Vec::new())?;
        serde_json::from_slice(&bytes)
            .map_err(|e| SnapshotError::Invalid(format!("{}: a bad listing: {e}", self.describe())))
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        self.call("GET", &NodeStore::file(key), Vec::new())
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.call("POST", &NodeStore::file(key), bytes.to_vec())
            .map(drop)
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.call("DELETE", &NodeStore::file(key), Vec::new())
            .map(drop)
    }
}
