//! Placement: an ordered chain of named filters, then scorers, over a read-only view of the
//! nodes. Each filter that rejects a node counts the rejection under its name; those counts
//! become the job's pending reason (`0/3 nodes fit: 2 gpu-type, 1 gpus-free`).

use crate::job::{JobId, JobSpec};
use crate::node::Node;
use crate::partition::Partition;
use std::collections::BTreeMap;

/// What every stage may look at besides the job and the node.
pub struct PlacementContext<'a> {
    /// The job's partition.
    pub partition: &'a Partition,
    /// Nodes held for a higher-priority job that could not start, with that job.
    pub reserved: &'a BTreeMap<String, JobId>,
}

/// A stage that rejects nodes unable to take a job.
pub trait Filter {
    /// Stable name, used in pending reasons.
    fn name(&self) -> &'static str;
    /// True when the stage judges the node as if it were empty and healthy: a job that every
    /// node rejects at a static stage can never run on this cluster.
    fn is_static(&self) -> bool;
    /// True when `node` passes.
    fn accepts(&self, job: &JobSpec, node: &Node, ctx: &PlacementContext<'_>) -> bool;
}

/// A stage that ranks the nodes that passed every filter. Higher is better.
pub trait Scorer {
    /// Stable name.
    fn name(&self) -> &'static str;
    /// The node's score for the job.
    fn score(&self, job: &JobSpec, node: &Node) -> i64;
}

macro_rules! filter {
    ($(#[$doc:meta])* $ty:ident, $name:literal, static = $static:literal, |$job:ident, $node:ident, $ctx:ident| $body:expr) => {
        $(#[$doc])*
        pub struct $ty;
        impl Filter for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn is_static(&self) -> bool {
                $static
            }
            fn accepts(&self, $job: &JobSpec, $node: &Node, $ctx: &PlacementContext<'_>) -> bool {
                $body
            }
        }
    };
}

filter!(
    /// The node belongs to the job's partition.
    PartitionFilter, "partition", static = true,
    |_job, node, ctx| ctx.partition.has_node(node.name())
);
filter!(
    /// The node has GPUs of the requested type at all.
    GpuTypeFilter, "gpu-type", static = true,
    |job, node, _ctx| job.resources.gpus == 0 || node.gpus_of_type(job.resources.gpu_type.as_deref()).next().is_some()
);
filter!(
    /// The node has enough GPUs of the requested type in all.
    GpuCountFilter, "gpu-count", static = true,
    |job, node, _ctx| node.gpus_of_type(job.resources.gpu_type.as_deref()).count() >= job.resources.gpus as usize
);
filter!(
    /// The node has enough cores in all.
    CpuCountFilter, "cpu-count", static = true,
    |job, node, _ctx| node.spec.cpus >= job.resources.cpus
);
filter!(
    /// The node has enough memory in all.
    MemorySizeFilter, "memory-size", static = true,
    |job, node, _ctx| node.spec.mem_mib >= job.resources.mem_mib
);
filter!(
    /// The node is up and not draining.
    NodeUpFilter, "node-up", static = false,
    |_job, node, _ctx| node.accepts_jobs()
);
filter!(
    /// Enough of the node's GPUs are free now.
    GpusFreeFilter, "gpus-free", static = false,
    |job, node, _ctx| node.free_gpus(job.resources.gpu_type.as_deref()).count() >= job.resources.gpus as usize
);
filter!(
    /// Enough of the node's cores are free now.
    CpusFreeFilter, "cpus-free", static = false,
    |job, node, _ctx| node.free_cpus() >= job.resources.cpus
);
filter!(
    /// Enough of the node's memory is free now.
    MemoryFreeFilter, "memory-free", static = false,
    |job, node, _ctx| node.free_mem_mib() >= job.resources.mem_mib
);
filter!(
    /// The node is not held for a higher-priority job that is waiting for it.
    ReservedFilter, "reserved", static = false,
    |_job, node, ctx| !ctx.reserved.contains_key(node.name())
);

/// Prefers the node left fullest after placement, so that large jobs find whole nodes free.
pub struct BinPackScorer;

impl Scorer for BinPackScorer {
    fn name(&self) -> &'static str {
        "binpack"
    }
    fn score(&self, job: &JobSpec, node: &Node) -> i64 {
        let gpus_left = node.free_gpus(None).count() as i64 - job.resources.gpus as i64;
        let cpus_left = node.free_cpus() as i64 - job.resources.cpus as i64;
        -(gpus_left * 100_000 + cpus_left)
    }
}

/// Names of the stages that reflect resources busy right now, as opposed to configuration.
pub const BUSY_STAGES: [&str; 3] = ["gpus-free", "cpus-free", "memory-free"];

/// The filter and scorer chain, in order.
pub struct Chain {
    filters: Vec<Box<dyn Filter + Send + Sync>>,
    scorers: Vec<Box<dyn Scorer + Send + Sync>>,
}

impl Default for Chain {
    /// Static filters first (could the node ever fit?), then health, then what is free now,
    /// then reservations, so that a reservation is blamed only where the job would otherwise fit.
    fn default() -> Self {
        Chain {
            filters: vec![
                Box::new(PartitionFilter),
                Box::new(GpuTypeFilter),
                Box::new(GpuCountFilter),
                Box::new(CpuCountFilter),
                Box::new(MemorySizeFilter),
                Box::new(NodeUpFilter),
                Box::new(GpusFreeFilter),
                Box::new(CpusFreeFilter),
                Box::new(MemoryFreeFilter),
                Box::new(ReservedFilter),
            ],
            scorers: vec![Box::new(BinPackScorer)],
        }
    }
}

/// The nodes each filter rejected, in chain order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rejections {
    /// Nodes looked at.
    pub considered: usize,
    /// Nodes that passed every filter.
    pub fit: usize,
    /// (stage name, nodes it rejected), for stages that rejected any.
    pub by_stage: Vec<(&'static str, usize)>,
    /// Nodes that failed only at a busy-resource stage: they would fit if jobs ended.
    pub busy_nodes: Vec<String>,
}

impl Rejections {
    /// Nodes rejected at `stage`.
    pub fn count(&self, stage: &str) -> usize {
        self.by_stage
            .iter()
            .find(|(s, _)| *s == stage)
            .map_or(0, |(_, n)| *n)
    }

    /// The counts as people read them: `0/3 nodes fit: 2 gpu-type, 1 gpus-free`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .by_stage
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        format!(
            "{}/{} nodes fit: {}",
            self.fit,
            self.considered,
            parts.join(", ")
        )
    }
}

/// Where a job would go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Node name.
    pub node: String,
    /// GPU indexes to give it, lowest first.
    pub gpus: Vec<u32>,
}

impl Chain {
    /// Runs the chain over `nodes` (in their iteration order, which must be deterministic).
    /// Returns the best node, or the rejection counts when none fits.
    pub fn place<'n>(
        &self,
        job: &JobSpec,
        nodes: impl Iterator<Item = &'n Node>,
        ctx: &PlacementContext<'_>,
    ) -> Result<Choice, Rejections> {
        let mut rejections = Rejections::default();
        let mut counts = vec![0usize; self.filters.len()];
        let mut best: Option<(i64, &Node)> = None;
        for node in nodes {
            rejections.considered += 1;
            match self.filters.iter().position(|f| !f.accepts(job, node, ctx)) {
                Some(i) => {
                    counts[i] += 1;
                    if BUSY_STAGES.contains(&self.filters[i].name()) {
                        rejections.busy_nodes.push(node.name().to_string());
                    }
                }
                None => {
                    rejections.fit += 1;
                    let score: i64 = self.scorers.iter().map(|s| s.score(job, node)).sum();
                    // Strictly greater: ties keep the earlier node, so the order decides.
                    if best.is_none_or(|(b, _)| score > b) {
                        best = Some((score, node));
                    }
                }
            }
        }
        if let Some((_, node)) = best {
            let gpus = node
                .free_gpus(job.resources.gpu_type.as_deref())
                .take(job.resources.gpus as usize)
                .collect();
            return Ok(Choice {
                node: node.name().to_string(),
                gpus,
            });
        }
        rejections.by_stage = self
            .filters
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(f, n)| (f.name(), n))
            .collect();
        Err(rejections)
    }

    /// True when some node passes every static filter, i.e. the job could run on an empty cluster.
    pub fn could_ever_fit<'n>(
        &self,
        job: &JobSpec,
        mut nodes: impl Iterator<Item = &'n Node>,
        ctx: &PlacementContext<'_>,
    ) -> bool {
        nodes.any(|node| {
            self.filters
                .iter()
                .filter(|f| f.is_static())
                .all(|f| f.accepts(job, node, ctx))
        })
    }

    /// The filter names, in order.
    pub fn filter_names(&self) -> Vec<&'static str> {
        self.filters.iter().map(|f| f.name()).collect()
    }

    /// The scorer names, in order.
    pub fn scorer_names(&self) -> Vec<&'static str> {
        self.scorers.iter().map(|s| s.name()).collect()
    }
}
