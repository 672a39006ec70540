//! The trace simulator: replays a job trace through the same [`Scheduler`] the controller runs,
//! with a simulated clock and a model of dataset staging, so that a season of a lab's jobs
//! replays in seconds and every run is reproducible from its seed.
//!
//! Staging model: each node has an SSD cache of datasets. A placed job holds its GPUs while
//! the datasets it reads are copied from shared storage; the shared storage's bandwidth is split
//! evenly among the transfers in flight, and a node's SSD bandwidth among that node's. A dataset
//! already complete on the node costs nothing. Cached datasets are evicted to make room: by
//! least recent use, or (with prefetch) the one whose next use in the queue is furthest away
//! (data no queued job reads by least recent use, then size). Datasets in use or in transfer
//! are pinned. A prefetch uses free space only; it never evicts.
//!
//! All three policies order the queue the same way (first come, first served, with backfill by
//! time limits), so that the comparison isolates how data is handled:
//! - `fifo`: first-fit placement, LRU cache, staging only once a job is placed;
//! - `locality`: the dataset-locality scorer (then bin-packing), staging when placed;
//! - `locality+prefetch`: also stages ahead onto the node reserved for a job expected to start
//!   within the horizon, evicting by furthest next use, with pins.

pub mod config;
pub mod report;
pub mod trace;

use crate::cache_view::CacheView;
use crate::job::{JobId, JobSpec, JobState, Resources};
use crate::node::{GpuDevice, NodeSpec};
use crate::partition::Partition;
use crate::policy::{CreditPolicy, PlacementPolicy, Policy, PriorityWeights};
use crate::scheduler::{Decision, Scheduler};
use crate::time::{TimeLimit, Timestamp};
use config::ClusterSpec;
use report::{JobRecord, SimReport};
use std::collections::BTreeMap;
use trace::TraceJob;

/// A data-handling policy to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SimPolicy {
    /// First fit, LRU cache, staging at placement.
    Fifo,
    /// Locality scorer, staging at placement.
    Locality,
    /// Locality scorer, prefetch within the horizon, furthest-next-use eviction, pins.
    LocalityPrefetch,
}

impl SimPolicy {
    /// Every policy, in the order they are reported.
    pub const ALL: [SimPolicy; 3] = [
        SimPolicy::Fifo,
        SimPolicy::Locality,
        SimPolicy::LocalityPrefetch,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SimPolicy::Fifo => "fifo",
            SimPolicy::Locality => "locality",
            SimPolicy::LocalityPrefetch => "locality+prefetch",
        }
    }

    /// Parses a name.
    pub fn parse(name: &str) -> Option<SimPolicy> {
        SimPolicy::ALL.into_iter().find(|p| p.name() == name.trim())
    }

    fn prefetch(self) -> bool {
        self == SimPolicy::LocalityPrefetch
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct SimInput {
    /// The trace.
    pub jobs: Vec<TraceJob>,
    /// Dataset sizes, bytes.
    pub datasets: BTreeMap<String, u64>,
    /// The cluster.
    pub cluster: ClusterSpec,
    /// How far ahead prefetch looks, seconds.
    pub horizon_s: u64,
    /// Seed for tie-breaking node order.
    pub seed: u64,
}

/// Why a run could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A job reads a dataset with no size.
    #[error("trace job {job} reads dataset '{dataset}', which the datasets file does not list")]
    UnknownDataset {
        /// Trace job id.
        job: u64,
        /// The dataset.
        dataset: String,
    },
    /// A dataset is larger than a node's cache.
    #[error(
        "dataset '{dataset}' ({bytes} bytes) is larger than a node's cache ({ssd} bytes); give --ssd more room"
    )]
    DatasetTooBig {
        /// The dataset.
        dataset: String,
        /// Its size.
        bytes: u64,
        /// The cache size.
        ssd: u64,
    },
}

/// GPU-hour weights for the credit figures: newer GPUs cost more.
pub fn sim_credit_weights() -> BTreeMap<String, f64> {
    [("v100", 1.0), ("p100", 0.5), ("k80", 0.25)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn scheduler_policy(policy: SimPolicy, seed: u64, horizon_s: u64) -> Policy {
    Policy {
        // Credits are reported, not enforced: all three policies order the queue alike.
        credits: CreditPolicy {
            monthly_grant: f64::INFINITY,
            gpu_weights: sim_credit_weights(),
            ..CreditPolicy::default()
        },
        weights: PriorityWeights {
            age: 1.0,
            fairshare: 0.0,
            partition: 0.0,
            max_age_s: 100 * 365 * 86_400,
            half_life_s: 7 * 86_400,
        },
        placement: PlacementPolicy {
            locality: policy != SimPolicy::Fifo,
            binpack: policy != SimPolicy::Fifo,
            max_reservations: 64,
            prefetch_horizon_s: policy.prefetch().then_some(horizon_s),
            node_order_seed: Some(seed),
        },
    }
}

#[derive(Debug, Clone)]
struct Cached {
    bytes: u64,
    complete: bool,
    last_use: Timestamp,
}

#[derive(Debug, Clone)]
struct Transfer {
    node: usize,
    dataset: String,
    remaining: f64,
}

#[derive(Debug, Clone)]
struct SimNode {
    name: String,
    gpu_type: String,
    cache: BTreeMap<String, Cached>,
}

impl SimNode {
    fn used(&self) -> u64 {
        self.cache.values().map(|c| c.bytes).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Queued,
    Staging {
        node: usize,
        placed: Timestamp,
    },
    Running {
        node: usize,
        placed: Timestamp,
        compute: Timestamp,
        end: Timestamp,
    },
    Done,
}

struct World<'a> {
    input: &'a SimInput,
    policy: SimPolicy,
    nodes: Vec<SimNode>,
    transfers: Vec<Transfer>,
    phase: BTreeMap<JobId, Phase>,
    trace: BTreeMap<JobId, &'a TraceJob>,
    records: Vec<JobRecord>,
    shared_bytes: f64,
    hits: u64,
    needs: u64,
    /// Prefetches already acted on: a prediction repeats every pass, and is acted on once.
    prefetched: std::collections::BTreeSet<(JobId, usize, String)>,
    /// Position of each dataset's first use in the queue, for furthest-next-use eviction.
    next_use: BTreeMap<String, usize>,
}

impl CacheView for World<'_> {
    fn cached_bytes(&self, node: &str, dataset: &str) -> u64 {
        let Some(n) = self.nodes.iter().find(|n| n.name == node) else {
            return 0;
        };
        match n.cache.get(dataset) {
            Some(c) if c.complete => c.bytes,
            Some(c) => {
                let left = self
                    .transfers
                    .iter()
                    .find(|t| self.nodes[t.node].name == node && t.dataset == dataset)
                    .map_or(0.0, |t| t.remaining);
                (c.bytes as f64 - left).max(0.0) as u64
            }
            None => 0,
        }
    }
}

impl World<'_> {
    fn dataset_bytes(&self, dataset: &str) -> u64 {
        self.input.datasets.get(dataset).copied().unwrap_or(0)
    }

    fn pinned(&self, node: usize, dataset: &str) -> bool {
        let in_use = self.phase.iter().any(|(id, p)| {
            let on = match p {
                Phase::Staging { node: n, .. } | Phase::Running { node: n, .. } => *n == node,
                _ => false,
            };
            on && self.trace[id].dataset == dataset
        });
        in_use
            || self
                .transfers
                .iter()
                .any(|t| t.node == node && t.dataset == dataset)
    }

    /// Makes room for `bytes` on `node` by evicting unpinned complete datasets; false when it
    /// cannot. A prefetch uses free space only: it acts on a prediction, and evicting data that
    /// is surely wanted for data that may be wanted costs more than it saves when the cache is
    /// smaller than the working set.
    fn make_room(&mut self, node: usize, bytes: u64, prefetch: bool) -> bool {
        let capacity = self.input.cluster.ssd_bytes;
        while capacity.saturating_sub(self.nodes[node].used()) < bytes {
            if prefetch {
                return false;
            }
            let victims: Vec<(String, u64, Timestamp)> = self.nodes[node]
                .cache
                .iter()
                .filter(|(d, c)| c.complete && !self.pinned(node, d))
                .map(|(d, c)| (d.clone(), c.bytes, c.last_use))
                .collect();
            let victim = if self.policy.prefetch() {
                // Furthest next use in the queue first. Data no queued job reads has no known
                // next use: among it, the least recently used goes first (recency is the best
                // guess left), then the largest.
                victims
                    .iter()
                    .max_by_key(|(d, b, used)| {
                        (
                            self.next_use.get(d).copied().unwrap_or(usize::MAX),
                            std::cmp::Reverse(*used),
                            *b,
                        )
                    })
                    .map(|(d, _, _)| d.clone())
            } else {
                victims
                    .iter()
                    .min_by_key(|(_, _, used)| *used)
                    .map(|(d, _, _)| d.clone())
            };
            let Some(victim) = victim else { return false };
            self.nodes[node].cache.remove(&victim);
        }
        true
    }

    /// Makes sure `dataset` is on `node` or on its way; false when there is no room yet.
    /// `prefetch` marks a stage-ahead (see [`World::make_room`]).
    fn ensure(&mut self, node: usize, dataset: &str, now: Timestamp, prefetch: bool) -> bool {
        let bytes = self.dataset_bytes(dataset);
        if bytes == 0 {
            return true;
        }
        if let Some(c) = self.nodes[node].cache.get_mut(dataset) {
            c.last_use = now;
            return true;
        }
        if !self.make_room(node, bytes, prefetch) {
            return false;
        }
        self.nodes[node].cache.insert(
            dataset.to_string(),
            Cached {
                bytes,
                complete: false,
                last_use: now,
            },
        );
        self.transfers.push(Transfer {
            node,
            dataset: dataset.to_string(),
            remaining: bytes as f64,
        });
        true
    }

    fn complete(&self, node: usize, dataset: &str) -> bool {
        self.dataset_bytes(dataset) == 0
            || self.nodes[node]
                .cache
                .get(dataset)
                .is_some_and(|c| c.complete)
    }

    /// Bytes per second of each transfer in flight: a max-min fair split of the shared
    /// storage's bandwidth, where each transfer is also capped by its share of its node's SSD.
    /// Bandwidth a capped transfer cannot use goes to the others.
    fn rates(&self) -> Vec<f64> {
        let mut per_node = vec![0usize; self.nodes.len()];
        for t in &self.transfers {
            per_node[t.node] += 1;
        }
        let caps: Vec<f64> = self
            .transfers
            .iter()
            .map(|t| self.input.cluster.ssd_bw / per_node[t.node] as f64)
            .collect();
        let mut order: Vec<usize> = (0..caps.len()).collect();
        order.sort_by(|a, b| caps[*a].total_cmp(&caps[*b]).then(a.cmp(b)));
        let mut rates = vec![0.0; caps.len()];
        let mut left = self.input.cluster.shared_bw;
        for (k, i) in order.iter().enumerate() {
            let fair = left / (order.len() - k) as f64;
            rates[*i] = caps[*i].min(fair);
            left -= rates[*i];
        }
        rates
    }

    /// Moves transfers forward by `dt` seconds; returns the ones that finished.
    fn advance(&mut self, dt: f64, now: Timestamp) {
        if dt <= 0.0 || self.transfers.is_empty() {
            return;
        }
        let rates = self.rates();
        for (t, r) in self.transfers.iter_mut().zip(rates) {
            let moved = (r * dt).min(t.remaining);
            t.remaining -= moved;
            self.shared_bytes += moved;
        }
        let (done, left): (Vec<Transfer>, Vec<Transfer>) =
            self.transfers.drain(..).partition(|t| t.remaining <= 0.5);
        self.transfers = left;
        for t in done {
            self.shared_bytes += t.remaining;
            if let Some(c) = self.nodes[t.node].cache.get_mut(&t.dataset) {
                c.complete = true;
                c.last_use = now;
            }
        }
    }

    /// When the next transfer finishes, if any.
    fn next_transfer_end(&self, now: Timestamp) -> Option<Timestamp> {
        self.rates()
            .iter()
            .zip(&self.transfers)
            .map(|(r, t)| Timestamp(now.0 + ((t.remaining / r) * 1000.0).ceil().max(1.0) as i64))
            .min()
    }
}

/// The time limit a simulated job is submitted with: its longest run time on the cluster's GPU
/// types, a quarter more, an hour, and four times what copying its dataset alone takes (the
/// limit runs while data is staged), rounded up to the hour, as users write them.
fn time_limit_for(job: &TraceJob, cluster: &ClusterSpec, dataset_bytes: u64) -> TimeLimit {
    let longest = cluster
        .groups
        .iter()
        .filter_map(|g| job.duration_on(&g.gpu_type))
        .fold(0.0f64, f64::max);
    let staging = 4.0 * dataset_bytes as f64 / cluster.shared_bw.min(cluster.ssd_bw);
    let secs = longest * 1.25 + 3600.0 + staging;
    TimeLimit::Seconds(((secs / 3600.0).ceil() as u64).max(1) * 3600)
}

/// The GPU type a job must run on: none when every type in the cluster will do, else the
/// first type (in the spec's order) it has a run time for and fits on.
fn gpu_type_for(job: &TraceJob, cluster: &ClusterSpec) -> Option<String> {
    if cluster
        .groups
        .iter()
        .all(|g| job.duration_on(&g.gpu_type).is_some())
    {
        return None;
    }
    cluster
        .groups
        .iter()
        .find(|g| g.gpus >= job.gpus && job.duration_on(&g.gpu_type).is_some())
        .map(|g| g.gpu_type.clone())
}

/// Replays `input` under `policy`.
pub fn simulate(input: &SimInput, policy: SimPolicy) -> Result<SimReport, SimError> {
    for j in &input.jobs {
        if j.dataset != "none" && !input.datasets.contains_key(&j.dataset) {
            return Err(SimError::UnknownDataset {
                job: j.job_id,
                dataset: j.dataset.clone(),
            });
        }
    }
    if let Some((d, b)) = input
        .datasets
        .iter()
        .find(|(_, b)| **b > input.cluster.ssd_bytes)
    {
        return Err(SimError::DatasetTooBig {
            dataset: d.clone(),
            bytes: *b,
            ssd: input.cluster.ssd_bytes,
        });
    }
    let partition = Partition {
        name: "sim".into(),
        default: true,
        priority: 0,
        nodes: None,
        default_time: TimeLimit::Unlimited,
        max_time: TimeLimit::Unlimited,
        allow_accounts: None,
        max_gpus_per_job: None,
    };
    let mut sched = Scheduler::with_policy(
        vec![partition],
        scheduler_policy(policy, input.seed, input.horizon_s),
    )
    .expect("one default partition");
    let mut nodes = Vec::new();
    for (g, group) in input.cluster.groups.iter().enumerate() {
        for i in 0..group.count {
            let name = format!("{}-{g}-{i:02}", group.gpu_type);
            let gpus = (0..group.gpus)
                .map(|index| GpuDevice {
                    index,
                    gpu_type: group.gpu_type.clone(),
                    product: "sim".into(),
                    memory_mib: 0,
                    uuid: None,
                    share: 1,
                })
                .collect();
            sched
                .upsert_node(NodeSpec {
                    name: name.clone(),
                    gpus,
                    cpus: group.gpus * 8,
                    mem_mib: 0,
                })
                .expect("at most 64 GPUs per node");
            nodes.push(SimNode {
                name,
                gpu_type: group.gpu_type.clone(),
                cache: BTreeMap::new(),
            });
        }
    }
    let mut arrivals: Vec<&TraceJob> = input.jobs.iter().collect();
    arrivals.sort_by(|a, b| {
        a.submit_s
            .total_cmp(&b.submit_s)
            .then(a.job_id.cmp(&b.job_id))
    });
    // A job runs only on node groups it has a run time for and fits on.
    let fits = |j: &TraceJob| {
        input
            .cluster
            .groups
            .iter()
            .any(|g| g.gpus >= j.gpus && j.duration_on(&g.gpu_type).is_some())
    };
    let (runnable, rejected): (Vec<&TraceJob>, Vec<&TraceJob>) =
        arrivals.into_iter().partition(|j| fits(j));

    let mut world = World {
        input,
        policy,
        nodes,
        transfers: Vec::new(),
        phase: BTreeMap::new(),
        trace: BTreeMap::new(),
        records: Vec::new(),
        shared_bytes: 0.0,
        hits: 0,
        needs: 0,
        next_use: BTreeMap::new(),
        prefetched: std::collections::BTreeSet::new(),
    };
    let mut next_arrival = 0usize;
    let mut now = Timestamp(0);
    loop {
        // Arrivals due now.
        while next_arrival < runnable.len()
            && Timestamp((runnable[next_arrival].submit_s * 1000.0) as i64) <= now
        {
            let j = runnable[next_arrival];
            let id = JobId(j.job_id);
            sched.enqueue(JobSpec {
                id,
                name: j.job_type.clone(),
                user: j.user.clone(),
                partition: "sim".into(),
                resources: Resources {
                    gpus: j.gpus,
                    gpu_type: gpu_type_for(j, &input.cluster),
                    cpus: 1,
                    mem_mib: 0,
                    gpu_share: false,
                },
                time_limit: time_limit_for(
                    j,
                    &input.cluster,
                    input.datasets.get(&j.dataset).copied().unwrap_or(0),
                ),
                submit_time: Timestamp((j.submit_s * 1000.0) as i64),
                datasets: if j.dataset == "none" {
                    Vec::new()
                } else {
                    vec![j.dataset.clone()]
                },
                ..JobSpec::default()
            });
            world.phase.insert(id, Phase::Queued);
            world.trace.insert(id, j);
            next_arrival += 1;
        }
        // Jobs that end now.
        let ending: Vec<(JobId, Phase)> = world
            .phase
            .iter()
            .filter(|(_, p)| matches!(p, Phase::Running { end, .. } if *end <= now))
            .map(|(i, p)| (*i, *p))
            .collect();
        for (id, p) in ending {
            if let Phase::Running {
                node,
                placed,
                compute,
                end,
            } = p
            {
                let limit_ms = sched.job(id).and_then(|spec| match spec.time_limit {
                    TimeLimit::Seconds(s) => Some(s as i64 * 1000),
                    TimeLimit::Unlimited => None,
                });
                sched.finish(id, JobState::Completed, end);
                let j = world.trace[&id];
                world.records.push(JobRecord {
                    limit_ms,
                    user: j.user.clone(),
                    gpus: j.gpus,
                    gpu_type: world.nodes[node].gpu_type.clone(),
                    submit: Timestamp((j.submit_s * 1000.0) as i64),
                    placed,
                    compute,
                    end,
                });
                world.phase.insert(id, Phase::Done);
            }
        }

        // A pass, seeing the caches as they are now.
        let order = sched.priority_order(now);
        world.next_use.clear();
        for (pos, id) in order.iter().enumerate() {
            if let Some(j) = world.trace.get(id) {
                world.next_use.entry(j.dataset.clone()).or_insert(pos);
            }
        }
        let decisions = sched.schedule_with(now, &world);
        for d in decisions {
            match d {
                Decision::Start {
                    job, allocation, ..
                } => {
                    let node = world
                        .nodes
                        .iter()
                        .position(|n| n.name == allocation.node)
                        .expect("a simulated node");
                    let dataset = world.trace[&job].dataset.clone();
                    if world.dataset_bytes(&dataset) > 0 {
                        world.needs += 1;
                        if world.complete(node, &dataset) {
                            world.hits += 1;
                        }
                    }
                    world
                        .phase
                        .insert(job, Phase::Staging { node, placed: now });
                }
                Decision::Prefetch {
                    job, node, dataset, ..
                } if world.policy.prefetch() => {
                    let i = world
                        .nodes
                        .iter()
                        .position(|n| n.name == node)
                        .expect("a simulated node");
                    if !world.prefetched.contains(&(job, i, dataset.clone()))
                        && world.ensure(i, &dataset, now, true)
                    {
                        world.prefetched.insert((job, i, dataset));
                    }
                }
                _ => {}
            }
        }
        // Staging jobs: start their transfers, and start computing once their data is there.
        let staging: Vec<(JobId, usize, Timestamp)> = world
            .phase
            .iter()
            .filter_map(|(id, p)| match p {
                Phase::Staging { node, placed } => Some((*id, *node, *placed)),
                _ => None,
            })
            .collect();
        for (id, node, placed) in staging {
            let j = world.trace[&id];
            world.ensure(node, &j.dataset, now, false);
            if world.complete(node, &j.dataset) {
                let runtime = j
                    .duration_on(&world.nodes[node].gpu_type)
                    .expect("checked type");
                let end = Timestamp(now.0 + (runtime * 1000.0).round() as i64);
                world.phase.insert(
                    id,
                    Phase::Running {
                        node,
                        placed,
                        compute: now,
                        end,
                    },
                );
            }
        }

        // The next thing that happens.
        let next = [
            runnable
                .get(next_arrival)
                .map(|j| Timestamp((j.submit_s * 1000.0) as i64)),
            world
                .phase
                .values()
                .filter_map(|p| {
                    if let Phase::Running { end, .. } = p {
                        Some(*end)
                    } else {
                        None
                    }
                })
                .min(),
            world.next_transfer_end(now),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        let next = next.max(Timestamp(now.0 + 1));
        world.advance((next.0 - now.0) as f64 / 1000.0, next);
        now = next;
    }
    let unfinished = world.phase.values().filter(|p| **p != Phase::Done).count();
    Ok(report::summarise(
        policy.name(),
        &world.records,
        report::Totals {
            rejected: rejected.len(),
            unfinished,
            total_gpus: input.cluster.groups.iter().map(|g| g.count * g.gpus).sum(),
            shared_bytes: world.shared_bytes,
            hits: world.hits,
            needs: world.needs,
        },
    ))
}
