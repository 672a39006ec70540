//! Where an off-box copy of the snapshot repository goes, as `[snapshots] copy_to` or
//! `labpool snapshot copy --to` writes it. Opening its store is the controller's
//! (`labpool_controller::snapshot_copies::open`): it needs the cluster key or the bucket's
//! credentials.

use std::path::PathBuf;

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
