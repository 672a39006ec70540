//! The simulated cluster: nodes, their local SSD caches, and the bandwidths staging shares.

use super::trace::TRACE_GPU_TYPES;
use serde::{Deserialize, Serialize};

/// A group of identical nodes: `4x8:v100` is 4 nodes of 8 V100s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeGroup {
    /// How many nodes.
    pub count: u32,
    /// GPUs per node.
    pub gpus: u32,
    /// Their type, one the trace has run times for.
    pub gpu_type: String,
}

/// The simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// Node groups.
    pub groups: Vec<NodeGroup>,
    /// Dataset cache per node, bytes.
    pub ssd_bytes: u64,
    /// Shared storage bandwidth, bytes/s, split among transfers in flight.
    pub shared_bw: f64,
    /// Each node's SSD write bandwidth, bytes/s, split among its transfers.
    pub ssd_bw: f64,
    /// Each node's network link, bytes/s: a copy from a peer is limited by the sender's and
    /// the receiver's.
    pub nic_bw: f64,
}

/// Why a cluster spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A node group did not parse.
    #[error("invalid node spec '{0}': write COUNTxGPUS:TYPE groups, comma-separated, e.g. 8x8:v100 or 4x8:v100,4x4:k80 (types: {types})", types = TRACE_GPU_TYPES.join(", "))]
    Nodes(String),
    /// A size or a rate did not parse.
    #[error(transparent)]
    Unit(#[from] labpool_units::UnitError),
}

/// Parses `8x8:v100` or `4x8:v100,4x4:k80`.
pub fn parse_nodes(text: &str) -> Result<Vec<NodeGroup>, SpecError> {
    let bad = || SpecError::Nodes(text.to_string());
    text.split(',')
        .map(|g| {
            let (counts, ty) = g.trim().split_once(':').ok_or_else(bad)?;
            let (n, gpus) = counts.split_once('x').ok_or_else(bad)?;
            let (count, gpus): (u32, u32) = (
                n.parse().map_err(|_| bad())?,
                gpus.parse().map_err(|_| bad())?,
            );
            let ty = ty.to_ascii_lowercase();
            if count == 0 || gpus == 0 || gpus > 64 || !TRACE_GPU_TYPES.contains(&ty.as_str()) {
                return Err(bad());
            }
            Ok(NodeGroup {
                count,
                gpus,
                gpu_type: ty,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let g = parse_nodes("4x8:V100, 2x4:k80").unwrap();
        assert_eq!(
            g[1],
            NodeGroup {
                count: 2,
                gpus: 4,
                gpu_type: "k80".into()
            }
        );
        for bad in ["8x8", "x8:v100", "8x8:a100", "0x8:v100", "8*8:v100"] {
            assert!(parse_nodes(bad).is_err(), "{bad}");
        }
    }
}
