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
use std::path::PathBuf;
use tokio::runtime::Handle;

/// A copy's place, as `[snapshots] copy_to` or `--to` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyTarget {
    /// A directory on this machine (a mounted backup disk).
    Dir(PathBuf),
    /// Another node's copy directory (`[agent] snapshot_copy` there): `node:NAME`.
    Node(String),
    /// A bucket: `s3://BUCKET/PREFIX`.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix (may be empty).
        prefix: String,
    },
}

impl CopyTarget {
    /// Parses `/abs/dir`, `node:NAME` or `s3://BUCKET[/PREFIX]`.
    pub fn parse(text: &str) -> Result<CopyTarget, String> {
        let how = "write an absolute directory, node:NAME or s3://BUCKET/PREFIX";
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("{text:?} names no bucket; {how}"));
            }
            return Ok(CopyTarget::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
            });
        }
        if let Some(name) = text.strip_prefix("node:") {
            if name.is_empty() || name.contains('/') {
                return Err(format!("{text:?} names no node; {how}"));
            }
            return Ok(CopyTarget::Node(name.to_string()));
        }
        let path = PathBuf::from(text);
        if !path.is_absolute() {
            return Err(format!("{text:?} is not an absolute path; {how}"));
        }
        Ok(CopyTarget::Dir(path))
    }

    /// Opens the store. A node is reached at `node_address` (its agent, from the controller's
    /// records), signed with the cluster key; a bucket with `[snapshots.s3]`.
    pub fn open(
        &self,
        config: &Config,
        node_address: Option<String>,
        runtime: Handle,
    ) -> anyhow::Result<Box<dyn Store + Send>> {
        Ok(match self {
            CopyTarget::Dir(dir) => Box::new(DirStore::new(dir)),
            CopyTarget::Node(name) => {
                let address = node_address.with_context(|| {
                    format!("node {name} has no agent the controller knows of; is it in `labpool nodes`?")
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            CopyTarget::parse("s3://lab/labpool/").unwrap(),
            CopyTarget::S3 {
                bucket: "lab".into(),
                prefix: "labpool".into()
            }
        );
        assert_eq!(
            CopyTarget::parse("node:gpu2").unwrap(),
            CopyTarget::Node("gpu2".into())
        );
        assert_eq!(
            CopyTarget::parse("/mnt/off").unwrap(),
            CopyTarget::Dir("/mnt/off".into())
        );
        for bad in ["relative/dir", "node:", "s3://", "node:a/b"] {
            assert!(CopyTarget::parse(bad).is_err(), "{bad}");
        }
    }
}
