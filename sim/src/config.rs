//! The simulated cluster: nodes, their local SSD caches, and the bandwidths staging shares.

use super::trace::TRACE_GPU_TYPES;
use serde::{Deserialize, Serialize};

/// A group of identical nodes: `4x8:v100` is 4 nodes of 8 V100s; `4x8:v100/4` cuts each card
/// into quarters, so that a trace job whose `slice` is 4 holds a quarter of one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeGroup {
    /// How many nodes.
    pub count: u32,
    /// GPUs per node.
    pub gpus: u32,
    /// Their type, one the trace has run times for.
    pub gpu_type: String,
    /// The slices its cards are cut into (`[4]`); empty: not sliced.
    #[serde(default)]
    pub slices: Vec<u32>,
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

impl ClusterSpec {
    /// True when `job` can run here: some node group fits its GPUs and has a run time for it.
    pub fn runs(&self, job: &super::trace::TraceJob) -> bool {
        self.groups
            .iter()
            .any(|g| g.gpus >= job.gpus && job.duration_on(&g.gpu_type).is_some())
    }
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
            let (ty, slices) = match ty.split_once('/') {
                Some((ty, d)) => {
                    let d: u32 = d.parse().map_err(|_| bad())?;
                    if !(2..=16).contains(&d) {
                        return Err(bad());
                    }
                    (ty, vec![d])
                }
                None => (ty, Vec::new()),
            };
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
                slices,
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
                gpu_type: "k80".into(),
                slices: Vec::new(),
            }
        );
        assert_eq!(parse_nodes("4x4:v100/4").unwrap()[0].slices, [4]);
        assert!(parse_nodes("4x4:v100/1").is_err());
        for bad in ["8x8", "x8:v100", "8x8:a100", "0x8:v100", "8*8:v100"] {
            assert!(parse_nodes(bad).is_err(), "{bad}");
        }
    }
}
