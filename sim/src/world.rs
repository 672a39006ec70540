//! The simulated nodes' caches and the transfers between shared storage and them.

use crate::report::JobRecord;
use crate::trace::TraceJob;
use crate::{SimInput, SimPolicy};
use labpool_lifecycle::Lifecycle;
use labpool_scheduler::cache_view::CacheView;
use labpool_scheduler::{JobId, JobState, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// A dataset in a node's cache.
#[derive(Debug, Clone)]
pub(crate) struct Cached {
    bytes: u64,
    complete: bool,
    last_use: Timestamp,
}

/// A copy from shared storage to a node in flight.
#[derive(Debug, Clone)]
pub(crate) struct Transfer {
    node: usize,
    dataset: String,
    remaining: f64,
}

/// A simulated node.
#[derive(Debug, Clone)]
pub(crate) struct SimNode {
    pub(crate) name: String,
    pub(crate) gpu_type: String,
    pub(crate) cache: BTreeMap<String, Cached>,
}

impl SimNode {
    fn used(&self) -> u64 {
        self.cache.values().map(|c| c.bytes).sum()
    }
}

/// Everything a run keeps: the nodes, their caches and transfers, and the jobs, whose states
/// are the lifecycle core's.
pub(crate) struct World<'a> {
    pub(crate) input: &'a SimInput,
    pub(crate) policy: SimPolicy,
    pub(crate) nodes: Vec<SimNode>,
    pub(crate) transfers: Vec<Transfer>,
    /// Every job not yet ended, as the daemon keeps them.
    pub(crate) life: Lifecycle,
    /// A placed job's node (index) and when it was placed.
    pub(crate) placed: BTreeMap<JobId, (usize, Timestamp)>,
    /// A running job's compute start and end.
    pub(crate) running: BTreeMap<JobId, (Timestamp, Timestamp)>,
    pub(crate) trace: BTreeMap<JobId, &'a TraceJob>,
    pub(crate) records: Vec<JobRecord>,
    pub(crate) shared_bytes: f64,
    pub(crate) hits: u64,
    pub(crate) needs: u64,
    /// Prefetches already acted on: a prediction repeats every pass, and is acted on once.
    pub(crate) prefetched: BTreeSet<(JobId, usize, String)>,
    /// Position of each dataset's first use in the queue, for furthest-next-use eviction.
    pub(crate) next_use: BTreeMap<String, usize>,
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
    pub(crate) fn dataset_bytes(&self, dataset: &str) -> u64 {
        self.input.datasets.get(dataset).copied().unwrap_or(0)
    }

    fn pinned(&self, node: usize, dataset: &str) -> bool {
        let in_use = self.life.jobs().any(|(id, l)| {
            let on = matches!(l.state, JobState::Staging | JobState::Running)
                && self
                    .placed
                    .get(&JobId(*id))
                    .is_some_and(|(n, _)| *n == node);
            on && self.trace[&JobId(*id)].dataset == dataset
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
    pub(crate) fn make_room(&mut self, node: usize, bytes: u64, prefetch: bool) -> bool {
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
            let victim = if self.policy.stages_ahead() {
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
    pub(crate) fn ensure(
        &mut self,
        node: usize,
        dataset: &str,
        now: Timestamp,
        prefetch: bool,
    ) -> bool {
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

    pub(crate) fn complete(&self, node: usize, dataset: &str) -> bool {
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
    pub(crate) fn advance(&mut self, dt: f64, now: Timestamp) {
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
    pub(crate) fn next_transfer_end(&self, now: Timestamp) -> Option<Timestamp> {
        self.rates()
            .iter()
            .zip(&self.transfers)
            .map(|(r, t)| Timestamp(now.0 + ((t.remaining / r) * 1000.0).ceil().max(1.0) as i64))
            .min()
    }
}
