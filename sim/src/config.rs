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
}

/// Why a cluster spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A node group did not parse.
    #[error("invalid node spec '{0}': write COUNTxGPUS:TYPE groups, comma-separated, e.g. 8x8:v100 or 4x8:v100,4x4:k80 (types: {types})", types = TRACE_GPU_TYPES.join(", "))]
    Nodes(String),
    /// A size did not parse.
    #[error(
        "invalid size '{0}': write a number with K, M, G or T (decimal, as disks are sold), e.g. 500G"
    )]
    Size(String),
    /// A rate did not parse.
    #[error("invalid bandwidth '{0}': write e.g. 10Gbit, 1250MB/s or 2GB/s")]
    Rate(String),
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

fn split_number(text: &str) -> Option<(f64, String)> {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let n: f64 = t[..end].parse().ok()?;
    (n > 0.0 && n.is_finite()).then(|| (n, t[end..].trim().to_ascii_lowercase()))
}

fn scale(prefix: &str) -> Option<f64> {
    match prefix {
        "" => Some(1.0),
        "k" => Some(1e3),
        "m" => Some(1e6),
        "g" => Some(1e9),
        "t" => Some(1e12),
        _ => None,
    }
}

/// Parses a size in decimal units: `500G` is 500 x 10^9 bytes.
pub fn parse_size(text: &str) -> Result<u64, SpecError> {
    let bad = || SpecError::Size(text.to_string());
    let (n, unit) = split_number(text).ok_or_else(bad)?;
    let prefix = unit.strip_suffix('b').unwrap_or(&unit);
    Ok((n * scale(prefix).ok_or_else(bad)?) as u64)
}

/// Parses a bandwidth: `10Gbit` (bits per second) or `1250MB/s` (bytes per second).
pub fn parse_rate(text: &str) -> Result<f64, SpecError> {
    let bad = || SpecError::Rate(text.to_string());
    let (n, unit) = split_number(text).ok_or_else(bad)?;
    if let Some(prefix) = unit
        .strip_suffix("bit")
        .or_else(|| unit.strip_suffix("bit/s"))
        .or_else(|| unit.strip_suffix("bps"))
    {
        return Ok(n * scale(prefix).ok_or_else(bad)? / 8.0);
    }
    let prefix = unit
        .strip_suffix("b/s")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    Ok(n * scale(prefix).ok_or_else(bad)?)
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
        assert_eq!(parse_size("500G").unwrap(), 500_000_000_000);
        assert_eq!(parse_size("1.5TB").unwrap(), 1_500_000_000_000);
        assert_eq!(parse_rate("10Gbit").unwrap(), 1.25e9);
        assert_eq!(parse_rate("1250MB/s").unwrap(), 1.25e9);
        assert_eq!(parse_rate("2GB/s").unwrap(), 2e9);
        assert!(parse_rate("fast").is_err());
        assert!(parse_size("-1G").is_err());
    }
}
