//! Placement: an ordered chain of named filters, then scorers, over a read-only view of the
//! nodes. Each filter that rejects a node counts the rejection under its name; those counts
//! become the job's pending reason (`0/3 nodes fit: 2 gpu-type, 1 gpus-free`). Scorers rank the
//! nodes that pass, compared in chain order: the first scorer decides, later ones break ties.
//!
//! A `--gpu-share` job needs, for each of its GPUs, one share slot of a GPU configured with
//! `share` > 1: the static `gpu-share` filter rejects nodes without enough such GPUs, and
//! `gpus-free` counts GPUs that are wholly free or shared with a slot left.

use crate::cache_view::CacheView;
use crate::job::JobSpec;
use crate::node::Node;
use crate::partition::Partition;
use crate::policy::PlacementPolicy;
use crate::profile::{Need, Profile};
use crate::time::Timestamp;

/// A node as placement sees it: its state and its capacity over time.
pub struct Candidate<'a> {
    /// The node.
    pub node: &'a Node,
    /// Its free capacity from now on, reservations included.
    pub profile: &'a Profile,
}

/// What every stage may look at besides the job and the node.
pub struct PlacementContext<'a> {
    /// The job's partition.
    pub partition: &'a Partition,
    /// Now.
    pub now: Timestamp,
    /// Dataset caches.
    pub cache: &'a dyn CacheView,
}

impl PlacementContext<'_> {
    /// When the job would end if it started now.
    pub fn end_if_started_now(&self, job: &JobSpec) -> Timestamp {
        self.now.plus_limit(job.time_limit)
    }
}

/// What `job` needs on `node`.
pub fn need_on(job: &JobSpec, node: &Node) -> Need {
    let r = &job.resources;
    let mut need = Need::whole(
        r.gpus,
        node.type_mask(r.gpu_type.as_deref()),
        r.cpus as i64,
        r.mem_mib as i64,
    );
    need.partner = node.partners();
    if r.shares_gpus() {
        need.shared = true;
        need.share = node.share_limits();
        for g in node.gpus_of_type(r.gpu_type.as_deref()) {
            if let Some(u) = need.units.get_mut(g.index as usize) {
                *u = crate::slice::units_on(r, g);
            }
        }
    } else {
        need.avoid = node.shareable_mask(None);
    }
    need
}

/// True when the job shares its GPUs (`--gpu-share` or a slice, with at least one GPU).
fn shares(job: &JobSpec) -> bool {
    job.resources.shares_gpus()
}

/// The GPUs of the job's type on `node` that can take its share (`--gpu-share` or its slice).
fn takers(job: &JobSpec, node: &Node) -> u32 {
    node.gpus_of_type(job.resources.gpu_type.as_deref())
        .filter(|g| crate::slice::units_on(&job.resources, g) > 0)
        .count() as u32
}

/// A stage that rejects nodes unable to take a job.
pub trait Filter {
    /// Stable name, used in pending reasons.
    fn name(&self) -> &'static str;
    /// True when the stage judges the node as if it were empty and healthy: a job that every
    /// node rejects at a static stage can never run on this cluster.
    fn is_static(&self) -> bool;
    /// True when the node passes.
    fn accepts(&self, job: &JobSpec, c: &Candidate<'_>, ctx: &PlacementContext<'_>) -> bool;
}

/// A stage that ranks the nodes that passed every filter. Higher is better.
pub trait Scorer {
    /// Stable name.
    fn name(&self) -> &'static str;
    /// The node's score for the job.
    fn score(&self, job: &JobSpec, c: &Candidate<'_>, ctx: &PlacementContext<'_>) -> i64;
}

macro_rules! filter {
    ($(#[$doc:meta])* $ty:ident, $name:literal, static = $static:literal, |$job:ident, $c:ident, $ctx:ident| $body:expr) => {
        $(#[$doc])*
        pub struct $ty;
        impl Filter for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn is_static(&self) -> bool {
                $static
            }
            fn accepts(&self, $job: &JobSpec, $c: &Candidate<'_>, $ctx: &PlacementContext<'_>) -> bool {
                $body
            }
        }
    };
}

filter!(
    /// The node belongs to the job's partition.
    PartitionFilter, "partition", static = true,
    |_job, c, ctx| ctx.partition.has_node(c.node.name())
);
filter!(
    /// The node is one the job named with `--nodelist`, if it named any.
    NodelistFilter, "nodelist", static = true,
    |job, c, _ctx| job.nodes.nodelist.is_empty() || job.nodes.nodelist.iter().any(|n| n == c.node.name())
);
filter!(
    /// The node is not one the job excluded with `--exclude`.
    ExcludeFilter, "exclude", static = true,
    |job, c, _ctx| !job.nodes.exclude.iter().any(|n| n == c.node.name())
);
filter!(
    /// The node has the features the job's `--constraint` asks for.
    FeaturesFilter, "features", static = true,
    |job, c, _ctx| job.nodes.constraint.as_ref().is_none_or(|k| k.holds(&c.node.spec.features))
);
filter!(
    /// The node has GPUs of the requested type at all.
    GpuTypeFilter, "gpu-type", static = true,
    |job, c, _ctx| job.resources.gpus == 0 || c.node.gpus_of_type(job.resources.gpu_type.as_deref()).next().is_some()
);
filter!(
    /// The node has enough GPUs of the requested type in all.
    GpuCountFilter, "gpu-count", static = true,
    |job, c, _ctx| c.node.gpus_of_type(job.resources.gpu_type.as_deref()).count() >= job.resources.gpus as usize
);
filter!(
    /// A `--gpu-share` job or a slice: the node has enough GPUs of the requested type that take
    /// it in all (shared, `share` > 1; for a slice, cut into that slice). A GPU with `share` = 1
    /// is never shared.
    GpuShareFilter, "gpu-share", static = true,
    |job, c, _ctx| !shares(job) || takers(job, c.node) >= job.resources.gpus
);
filter!(
    /// The node has enough cores in all.
    CpuCountFilter, "cpu-count", static = true,
    |job, c, _ctx| c.node.spec.cpus >= job.resources.cpus
);
filter!(
    /// The node has enough memory in all.
    MemorySizeFilter, "memory-size", static = true,
    |job, c, _ctx| c.node.spec.mem_mib >= job.resources.mem_mib
);
filter!(
    /// The node is up and not draining.
    NodeUpFilter, "node-up", static = false,
    |_job, c, _ctx| c.node.accepts_jobs()
);
filter!(
    /// Enough of the node's GPUs are free now (jobs placed earlier in this pass included): wholly
    /// free for a whole job; wholly free or shared with a slot left for a `--gpu-share` job.
    GpusFreeFilter, "gpus-free", static = false,
    |job, c, _ctx| {
        if shares(job) {
            c.profile.free_now().available_gpus(&need_on(job, c.node)).count_ones() >= job.resources.gpus
        } else {
            let eligible = c.node.type_mask(job.resources.gpu_type.as_deref());
            (c.profile.free_now().gpus & eligible).count_ones() >= job.resources.gpus
        }
    }
);
filter!(
    /// Enough of the node's cores are free now.
    CpusFreeFilter, "cpus-free", static = false,
    |job, c, _ctx| c.profile.free_now().cpus >= job.resources.cpus as i64
);
filter!(
    /// Enough of the node's memory is free now.
    MemoryFreeFilter, "memory-free", static = false,
    |job, c, _ctx| c.profile.free_now().mem >= job.resources.mem_mib as i64
);
filter!(
    /// Starting now would not delay a higher-priority job's reservation on this node: the job
    /// fits over its whole time limit (backfill).
    ReservedFilter, "reserved", static = false,
    |job, c, ctx| c.profile.fits(ctx.now, ctx.end_if_started_now(job), &need_on(job, c.node)).is_some()
);
filter!(
    /// The node's dataset cache can take the job's datasets without evicting a version that a
    /// running job, or one about to start, needs. Not a reservation stage: room comes back
    /// when jobs end, and GPUs are not held for it meanwhile.
    CacheRoomFilter, "cache-room", static = false,
    |job, c, ctx| job.datasets.is_empty() || ctx.cache.has_room(c.node.name(), &job.datasets)
);

/// Prefers the node that already holds the most bytes of the job's datasets.
pub struct LocalityScorer;

impl Scorer for LocalityScorer {
    fn name(&self) -> &'static str {
        "dataset-locality"
    }
    fn score(&self, job: &JobSpec, c: &Candidate<'_>, ctx: &PlacementContext<'_>) -> i64 {
        job.datasets
            .iter()
            .map(|d| ctx.cache.cached_bytes(c.node.name(), d) as i64)
            .sum()
    }
}

/// Prefers the node left fullest after placement, so that large jobs find whole nodes free.
/// A `--gpu-share` job first prefers the node where it breaks into the fewest wholly free GPUs
/// (joining other sharers), then the fullest.
pub struct BinPackScorer;

impl Scorer for BinPackScorer {
    fn name(&self) -> &'static str {
        "binpack"
    }
    fn score(&self, job: &JobSpec, c: &Candidate<'_>, ctx: &PlacementContext<'_>) -> i64 {
        let free = c.profile.free_now();
        let cpus_left = free.cpus - job.resources.cpus as i64;
        if !shares(job) {
            let gpus_left = free.gpus.count_ones() as i64 - job.resources.gpus as i64;
            return -(gpus_left * 100_000 + cpus_left);
        }
        // The GPUs it would take, as placement will pick them (the reserved filter passed).
        let taken = c
            .profile
            .fits(ctx.now, ctx.end_if_started_now(job), &need_on(job, c.node))
            .map_or(0, |t| t.gpus);
        let opened = (taken & free.gpus).count_ones() as i64;
        let gpus_left = free.gpus.count_ones() as i64 - opened;
        -(opened * 10_000_000_000 + gpus_left * 100_000 + cpus_left)
    }
}

/// Names of the stages that reflect resources busy right now, as opposed to configuration.
pub const BUSY_STAGES: [&str; 3] = ["gpus-free", "cpus-free", "memory-free"];

/// The filter and scorer chain, in order.
pub struct Chain {
    filters: Vec<Box<dyn Filter + Send + Sync>>,
    scorers: Vec<Box<dyn Scorer + Send + Sync>>,
}

impl Chain {
    /// The chain for a placement policy. Static filters come first (could the node ever fit?),
    /// then health, then what is free now, then reservations, so that a reservation is blamed
    /// only where the job would otherwise fit, then room in the dataset cache. Scorers: dataset locality, then bin-packing;
    /// with neither, the first node in order wins (first fit).
    pub fn for_policy(policy: &PlacementPolicy) -> Chain {
        let mut scorers: Vec<Box<dyn Scorer + Send + Sync>> = Vec::new();
        if policy.locality {
            scorers.push(Box::new(LocalityScorer));
        }
        if policy.binpack {
            scorers.push(Box::new(BinPackScorer));
        }
        Chain {
            filters: vec![
                Box::new(PartitionFilter),
                Box::new(NodelistFilter),
                Box::new(ExcludeFilter),
                Box::new(FeaturesFilter),
                Box::new(GpuTypeFilter),
                Box::new(GpuCountFilter),
                Box::new(GpuShareFilter),
                Box::new(CpuCountFilter),
                Box::new(MemorySizeFilter),
                Box::new(NodeUpFilter),
                Box::new(GpusFreeFilter),
                Box::new(CpusFreeFilter),
                Box::new(MemoryFreeFilter),
                Box::new(ReservedFilter),
                Box::new(CacheRoomFilter),
            ],
            scorers,
        }
    }
}

impl Default for Chain {
    fn default() -> Self {
        Chain::for_policy(&PlacementPolicy::default())
    }
}

/// The nodes each filter rejected, in chain order.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Rejections {
    /// Nodes looked at.
    pub considered: usize,
    /// Nodes that passed every filter.
    pub fit: usize,
    /// Nodes the job needs at once (a gang needs more than 1); 0 reads as 1.
    #[serde(default)]
    pub needed: usize,
    /// (stage name, nodes it rejected), for stages that rejected any.
    pub by_stage: Vec<(String, usize)>,
    /// Indexes (in the pass's node order) of nodes that failed only at a busy-resource stage
    /// or a reservation: they would fit once jobs end.
    #[serde(skip)]
    pub busy_nodes: Vec<usize>,
}

impl Rejections {
    /// Nodes rejected at `stage`.
    pub fn count(&self, stage: &str) -> usize {
        self.by_stage
            .iter()
            .find(|(s, _)| s == stage)
            .map_or(0, |(_, n)| *n)
    }

    /// The counts as people read them: `0/3 nodes fit: 2 gpu-type, 1 gpus-free`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .by_stage
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        let needs = match self.needed {
            0 | 1 => String::new(),
            n => format!(" (the job needs {n} at once)"),
        };
        let mut text = format!("{}/{} nodes fit{needs}", self.fit, self.considered);
        if !parts.is_empty() {
            text.push_str(&format!(": {}", parts.join(", ")));
        }
        text
    }
}

/// Where a job would go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Index of the node in the order the candidates were given.
    pub index: usize,
    /// GPU indexes to give it, lowest first.
    pub gpus: Vec<u32>,
}

impl Chain {
    /// Runs the chain over `nodes` (in a deterministic order) with their profiles. Returns the
    /// best node, or the rejection counts when none fits.
    pub fn place_in(
        &self,
        job: &JobSpec,
        nodes: &[&Node],
        profiles: &[Profile],
        ctx: &PlacementContext<'_>,
    ) -> Result<Choice, Rejections> {
        self.place_gang_in(job, 1, nodes, profiles, ctx)
            .map(|mut all| all.remove(0))
    }

    /// Runs the chain for a job on `count` nodes at once (a gang): the `count` best nodes that
    /// pass every filter, in node order, or the rejection counts when fewer than `count` do.
    /// Ranking is by score, ties to the earlier node, so `count` = 1 picks the single best.
    pub fn place_gang_in(
        &self,
        job: &JobSpec,
        count: usize,
        nodes: &[&Node],
        profiles: &[Profile],
        ctx: &PlacementContext<'_>,
    ) -> Result<Vec<Choice>, Rejections> {
        let count = count.max(1);
        let mut rejections = Rejections {
            needed: count,
            ..Rejections::default()
        };
        let mut counts = vec![0usize; self.filters.len()];
        let mut fits: Vec<(Vec<i64>, usize)> = Vec::new();
        for (i, (node, profile)) in nodes.iter().zip(profiles).enumerate() {
            let c = Candidate { node, profile };
            rejections.considered += 1;
            match self.filters.iter().position(|f| !f.accepts(job, &c, ctx)) {
                Some(k) => {
                    counts[k] += 1;
                    let name = self.filters[k].name();
                    if BUSY_STAGES.contains(&name) || name == "reserved" {
                        rejections.busy_nodes.push(i);
                    }
                }
                None => {
                    rejections.fit += 1;
                    let score: Vec<i64> =
                        self.scorers.iter().map(|s| s.score(job, &c, ctx)).collect();
                    fits.push((score, i));
                    // First fit: with no scorer, the earliest nodes win.
                    if self.scorers.is_empty() && fits.len() == count {
                        break;
                    }
                }
            }
        }
        if fits.len() >= count {
            // Best first; the sort is stable, so ties keep node order.
            fits.sort_by(|a, b| b.0.cmp(&a.0));
            fits.truncate(count);
            fits.sort_by_key(|(_, i)| *i);
            let choices = fits
                .into_iter()
                .map(|(_, i)| {
                    let taken = profiles[i]
                        .fits(
                            ctx.now,
                            ctx.end_if_started_now(job),
                            &need_on(job, nodes[i]),
                        )
                        .expect("the reserved filter passed");
                    let gpus = (0..64).filter(|b| taken.gpus & (1u64 << b) != 0).collect();
                    Choice { index: i, gpus }
                })
                .collect();
            return Ok(choices);
        }
        rejections.by_stage = self
            .filters
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(f, n)| (f.name().to_string(), n))
            .collect();
        Err(rejections)
    }

    /// True when `node` passes every static filter, i.e. could take the job when empty.
    pub fn statically_fits(
        &self,
        job: &JobSpec,
        c: &Candidate<'_>,
        ctx: &PlacementContext<'_>,
    ) -> bool {
        self.filters
            .iter()
            .filter(|f| f.is_static())
            .all(|f| f.accepts(job, c, ctx))
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
