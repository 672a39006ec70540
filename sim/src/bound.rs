//! The limit: the least that any policy could read from shared storage, and keep GPUs waiting
//! for data, on the same trace and nodes. Each policy is then placed on the way from fifo to it.
//!
//! Shared-storage bytes. A job reads its dataset from its node's cache, so each dataset that
//! fits a cache must be read from shared storage at least once (later copies can come from
//! peers); a dataset larger than every cache is streamed, so each job that reads it reads it
//! whole from shared storage. The bound is the sum of both, over the jobs that can run. No
//! policy of the simulator can read less.
//!
//! GPU time waiting for data. The figure counts GPU time held between a job's placement and
//! its data being complete on its node (a stream overlaps compute and counts none). A policy
//! that stages each dataset on a node before placing a job there (perfect prefetch) holds no
//! GPU while data arrives, so the bound is zero: every GPU-second of it is the policy's choice.
//! The price of that choice (later starts) shows in completion time and utilisation instead,
//! which is why the trade-off rows sit next to it.

use crate::SimInput;
use crate::report::SimReport;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The limit on one trace and cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// Least bytes any policy reads from shared storage.
    pub shared_bytes: f64,
    /// Least GPU-seconds any policy holds waiting for data.
    pub data_wait_gpu_s: f64,
}

/// The limit of `input`: its runnable jobs' datasets, as the module says.
pub fn bound(input: &SimInput) -> Bound {
    let cache = input.cluster.ssd_bytes;
    let runnable = input.jobs.iter().filter(|j| input.cluster.runs(j));
    let mut staged = BTreeSet::new();
    let mut streamed = 0.0;
    for j in runnable {
        let bytes = input.datasets.get(&j.dataset).copied().unwrap_or(0);
        if bytes == 0 {
            continue;
        }
        if bytes > cache {
            streamed += bytes as f64;
        } else {
            staged.insert(j.dataset.as_str());
        }
    }
    let once: f64 = staged
        .iter()
        .map(|d| input.datasets.get(*d).copied().unwrap_or(0) as f64)
        .sum();
    Bound {
        shared_bytes: once + streamed,
        data_wait_gpu_s: 0.0,
    }
}

/// How far `r` went from `fifo` towards `bound` on one figure: 0 at fifo, 1 at the bound
/// (negative: worse than fifo). `None` when fifo is at the bound already.
pub fn way(r: f64, fifo: f64, bound: f64) -> Option<f64> {
    let gap = fifo - bound;
    (gap > 0.0).then(|| (fifo - r) / gap)
}

/// A way as a percentage, `-` where there is none.
pub fn percent(way: Option<f64>) -> String {
    way.map_or("-".to_string(), |w| format!("{:.0}%", w * 100.0))
}

/// The bound and each policy's way to it, as lines under the table (the first fifo report is
/// the start; without one, the bound alone).
pub fn lines(reports: &[SimReport], bound: &Bound) -> String {
    let mut out = format!(
        "the limit on these jobs and nodes: shared storage {} (each dataset read once, streams in full), GPU time waiting for data {:.1} GPU-h (perfect prefetch)",
        labpool_units::format_size(bound.shared_bytes as u64),
        bound.data_wait_gpu_s / 3600.0
    );
    let Some(fifo) = reports.iter().find(|r| r.policy == "fifo") else {
        return out;
    };
    for r in reports.iter().filter(|r| r.policy != "fifo") {
        out.push_str(&format!(
            "\n{}: {} of the way from fifo to the limit in shared-storage bytes, {} in GPU time waiting for data",
            r.policy,
            percent(way(r.shared_bytes, fifo.shared_bytes, bound.shared_bytes)),
            percent(way(r.data_wait_gpu_s, fifo.data_wait_gpu_s, bound.data_wait_gpu_s)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_way_is_zero_at_fifo_and_one_at_the_bound() {
        assert_eq!(way(100.0, 100.0, 20.0), Some(0.0));
        assert_eq!(way(20.0, 100.0, 20.0), Some(1.0));
        assert_eq!(way(60.0, 100.0, 20.0), Some(0.5));
        assert_eq!(way(120.0, 100.0, 20.0), Some(-0.25));
        assert_eq!(way(10.0, 20.0, 20.0), None);
    }
}
