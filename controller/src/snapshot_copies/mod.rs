//! Where an off-box copy of the snapshot repository goes, and the store that reaches it:
//! a directory, another node's agent, or an S3-compatible bucket. The copying itself is
//! `labpool_snapshots::copy`'s.

pub mod node;
pub mod run;
pub mod s3;

use crate::settings::Config;
use crate::transport::SignedClient;
use anyhow::Context;
use labpool_snapshots::copy::{DirStore, Store};
use tokio::runtime::Handle;

pub use labpool_settings::copy_target::CopyTarget;

/// Opens the store of `target`. A node is reached at `node_address` (its agent, from the controller's
/// records), signed with the cluster key; a bucket with `[snapshots.s3]`.
pub fn open(
    target: &CopyTarget,
    config: &Config,
    node_address: Option<String>,
    runtime: Handle,
) -> anyhow::Result<Box<dyn Store + Send>> {
    Ok(match target {
        CopyTarget::Dir(dir) => Box::new(DirStore::new(dir)),
        CopyTarget::Node(name) => {
            let address = node_address.with_context(|| {
                format!(
                    "node {name} has no agent the controller knows of; is it in `labpool nodes`?"
                )
            })?;
            let key = labpool_cluster::ClusterKey::load(&config.cluster_key_path())
                .context("the cluster key signs requests to the node")?;
            let client = SignedClient::new(key, std::time::Duration::from_secs(300));
            Box::new(node::NodeStore::new(name, &address, client, runtime))
        }
        CopyTarget::S3 { bucket, prefix } => {
            let s3 = config
                .snapshots
                .s3
                .as_ref()
                .context("an s3:// copy needs [snapshots.s3] in the config")?;
            let file = &s3.secret_access_key_file;
            let secret = labpool_cluster::read_owner_only(
                file,
                "anyone on this machine could write to the bucket",
            )
            .map_err(|why| {
                anyhow::anyhow!("the secret access key file {}: {why}", file.display())
            })?;
            let credentials =
                rusty_s3::Credentials::new(s3.access_key_id.clone(), secret.trim().to_string());
            Box::new(s3::S3Store::new(
                &s3.endpoint,
                &s3.region,
                bucket,
                prefix,
                credentials,
                runtime,
            )?)
        }
    })
}
