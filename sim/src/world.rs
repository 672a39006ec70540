//! The simulated nodes' caches and the copies in flight into them.

use crate::links::{Capacities, Link, rates};
use crate::report::{CopyCounts, JobRecord};
use crate::trace::TraceJob;
use crate::{SimInput, SimPolicy};
use labpool_cache::evict::Candidate;
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
    /// The job a prefetch brought it for, until a job uses it.
    prefetched_for: Option<JobId>,
}

/// Where a copy reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The shared storage.
    Shared,
    /// Another node that holds the dataset complete.
    Peer(usize),
}

/// Why a copy runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A placed job waits for it.
    Stage,
    /// A prediction: the job is expected on this node.
    Prefetch(JobId),
    /// A running job reads a dataset larger than the cache straight from shared storage.
    Stream(JobId),
}

/// A copy in flight.
#[derive(Debug, Clone)]
pub(crate) struct Transfer {
    pub(crate) node: usize,
    pub(crate) dataset: String,
    remaining: f64,
    from: Source,
    pub(crate) kind: Kind,
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
    /// A running job's compute start and end (`NEVER` while it streams its data).
    pub(crate) running: BTreeMap<JobId, (Timestamp, Timestamp)>,
    /// A streaming job's run time, seconds: it ends when that much compute and its reads are
    /// both done.
    pub(crate) streaming: BTreeMap<JobId, f64>,
    pub(crate) trace: BTreeMap<JobId, &'a TraceJob>,
    pub(crate) records: Vec<JobRecord>,
    pub(crate) shared_bytes: f64,
    pub(crate) hits: u64,
    pub(crate) needs: u64,
    /// Prefetches already acted on: a prediction repeats every pass, and is acted on once.
    pub(crate) prefetched: BTreeSet<(JobId, usize, String)>,
    /// Jobs held while their data is copied to a node (a stage-in), until they are placed:
    /// their data stays on that node.
    pub(crate) staging_in: BTreeMap<JobId, usize>,
    /// (node, dataset) of the jobs the pass being carried out starts.
    pub(crate) starting: BTreeSet<(usize, String)>,
    /// Position of each dataset's first use in the queue, for furthest-next-use eviction.
    pub(crate) next_use: BTreeMap<String, usize>,
    /// Notices, stops and what they cost.
    pub(crate) preempt: crate::preemption::Preemptions,
    pub(crate) counts: CopyCounts,
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

    /// What is missing, over the rate a new copy would get now: a peer's link shared with
    /// what it already sends, else the shared storage's link shared with its copies.
    fn copy_seconds(&self, node: &str, datasets: &[String]) -> Option<f64> {
        let i = self.node_index(node)?;
        let c = &self.input.cluster;
        let mut secs = 0.0;
        for d in datasets {
            if self.streamed(d) {
                continue;
            }
            let missing = self
                .dataset_bytes(d)
                .saturating_sub(self.cached_bytes(node, d));
            if missing == 0 {
                continue;
            }
            let rate = match self.source_for(i, d) {
                Source::Peer(p) => c.nic_bw / (self.serving(p) + 1) as f64,
                Source::Shared => {
                    let reading = self.transfers.iter().filter(|t| t.from == Source::Shared);
                    c.shared_bw / (reading.count() + 1) as f64
                }
            };
            secs += missing as f64 / rate.min(c.ssd_bw);
        }
        Some(secs)
    }

    fn lacks(&self, node: &str, datasets: &[String]) -> bool {
        let Some(i) = self.node_index(node) else {
            return true;
        };
        datasets.iter().any(|d| !self.complete(i, d))
    }
}

impl World<'_> {
    /// The index of the simulated node called `name`.
    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    pub(crate) fn dataset_bytes(&self, dataset: &str) -> u64 {
        self.input.datasets.get(dataset).copied().unwrap_or(0)
    }

    /// A dataset larger than a node's whole cache is read from shared storage as the job runs.
    pub(crate) fn streamed(&self, dataset: &str) -> bool {
        self.dataset_bytes(dataset) > self.input.cluster.ssd_bytes
    }

    /// The daemon's guard rails and peer staging: the `labpool` policy only, so that the
    /// baselines stay what they were measured as.
    fn guarded(&self) -> bool {
        self.policy == SimPolicy::Labpool
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
        let held = self
            .staging_in
            .iter()
            .any(|(job, n)| *n == node && self.trace[job].dataset == dataset);
        in_use
            || held
            || self.starting.contains(&(node, dataset.to_string()))
            || self
                .transfers
                .iter()
                .any(|t| t.node == node && t.dataset == dataset)
    }

    /// Makes room for `bytes` on `node` by evicting unpinned complete datasets; false when it
    /// cannot. A prefetch for the job at queue position `prefetch_for` evicts only data no
    /// queued job reads sooner (the baselines' prefetch uses free space only).
    pub(crate) fn make_room(&mut self, node: usize, bytes: u64, prefetch: Option<usize>) -> bool {
        let capacity = self.input.cluster.ssd_bytes;
        while capacity.saturating_sub(self.nodes[node].used()) < bytes {
            let victims: Vec<(String, u64, Timestamp)> = self.nodes[node]
                .cache
                .iter()
                .filter(|(d, c)| c.complete && !self.pinned(node, d))
                .filter(|(d, _)| match prefetch {
                    None => true,
                    Some(pos) => {
                        self.guarded()
                            && labpool_cache::evict::prefetch_may_evict(
                                self.next_use.get(*d).copied(),
                                pos,
                            )
                    }
                })
                .map(|(d, c)| (d.clone(), c.bytes, c.last_use))
                .collect();
            let victim = if self.policy.stages_ahead() {
                // The daemon's own order (the node cache's): furthest next use in the queue
                // first, then the least recently used, then the largest.
                let candidates = victims
                    .iter()
                    .map(|(d, b, used)| Candidate {
                        key: d.clone(),
                        complete: true,
                        next_use: self.next_use.get(d).copied(),
                        last_use_ms: Some(used.0),
                        bytes: *b,
                    })
                    .collect();
                labpool_cache::evict::order(candidates).into_iter().next()
            } else {
                victims
                    .iter()
                    .min_by_key(|(_, _, used)| *used)
                    .map(|(d, _, _)| d.clone())
            };
            let Some(victim) = victim else { return false };
            let gone = self.nodes[node].cache.remove(&victim).expect("a victim");
            self.counts.evictions += 1;
            if self.next_use.contains_key(&victim) {
                self.counts.evictions_of_queued_data += 1;
            }
            if gone.prefetched_for.is_some() {
                self.counts.prefetches_evicted_unused += 1;
            }
        }
        true
    }

    /// Makes sure `dataset` is on `node` or on its way; false when there is no room yet.
    /// `kind` is a stage or a prefetch; a streamed dataset is never cached.
    pub(crate) fn ensure(
        &mut self,
        node: usize,
        dataset: &str,
        now: Timestamp,
        kind: Kind,
    ) -> bool {
        let bytes = self.dataset_bytes(dataset);
        if bytes == 0 || self.streamed(dataset) {
            return true;
        }
        if let Some(c) = self.nodes[node].cache.get_mut(dataset) {
            c.last_use = now;
            if kind == Kind::Stage && c.prefetched_for.take().is_some() {
                self.counts.prefetches_used += 1;
            }
            if kind == Kind::Stage {
                // A stage now waits on a prefetch in flight: it runs as a stage from here.
                for t in &mut self.transfers {
                    if t.node == node && t.dataset == dataset {
                        t.kind = Kind::Stage;
                    }
                }
            }
            return true;
        }
        let prefetch = match kind {
            Kind::Prefetch(job) => Some(self.next_use_of(job)),
            _ => None,
        };
        if !self.make_room(node, bytes, prefetch) {
            return false;
        }
        self.nodes[node].cache.insert(
            dataset.to_string(),
            Cached {
                bytes,
                complete: false,
                last_use: now,
                prefetched_for: match kind {
                    Kind::Prefetch(job) => Some(job),
                    _ => None,
                },
            },
        );
        let from = self.source_for(node, dataset);
        self.transfers.push(Transfer {
            node,
            dataset: dataset.to_string(),
            remaining: bytes as f64,
            from,
            kind,
        });
        true
    }

    /// The position of `job`'s dataset's first use in the queue.
    fn next_use_of(&self, job: JobId) -> usize {
        self.trace
            .get(&job)
            .and_then(|j| self.next_use.get(&j.dataset))
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// Copies node `p` is sending to its peers now.
    fn serving(&self, p: usize) -> usize {
        self.transfers
            .iter()
            .filter(|t| t.from == Source::Peer(p))
            .count()
    }

    /// A peer that holds `dataset` complete, in the daemon's order, else the shared storage.
    fn source_for(&self, node: usize, dataset: &str) -> Source {
        if !self.guarded() {
            return Source::Shared;
        }
        let candidates: Vec<(&str, usize)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| *i != node && n.cache.get(dataset).is_some_and(|c| c.complete))
            .map(|(i, n)| (n.name.as_str(), self.serving(i)))
            .collect();
        labpool_scheduler::peers::peer_order(candidates)
            .first()
            .and_then(|name| self.node_index(name))
            .map_or(Source::Shared, Source::Peer)
    }

    /// A job that was placed on `node`: prefetches for it elsewhere are wasted, and with the
    /// guard rails, those still in flight stop and leave their room.
    pub(crate) fn placed_on(&mut self, job: JobId, node: usize) {
        self.staging_in.remove(&job);
        let elsewhere: Vec<usize> = self
            .prefetched
            .iter()
            .filter(|(j, n, _)| *j == job && *n != node)
            .map(|(_, n, _)| *n)
            .collect();
        self.counts.prefetches_elsewhere += elsewhere.len() as u64;
        if !self.guarded() {
            return;
        }
        let cancelled: Vec<Transfer> = self
            .transfers
            .iter()
            .filter(|t| t.kind == Kind::Prefetch(job) && t.node != node)
            .cloned()
            .collect();
        for t in cancelled {
            self.counts.prefetches_cancelled += 1;
            self.transfers
                .retain(|x| !(x.node == t.node && x.dataset == t.dataset));
            self.nodes[t.node].cache.remove(&t.dataset);
        }
    }

    /// A streaming job starts reading its dataset from shared storage.
    pub(crate) fn stream(&mut self, job: JobId, node: usize, dataset: &str) {
        self.counts.streamed_jobs += 1;
        self.transfers.push(Transfer {
            node,
            dataset: dataset.to_string(),
            remaining: self.dataset_bytes(dataset) as f64,
            from: Source::Shared,
            kind: Kind::Stream(job),
        });
    }

    /// A job that ended or was stopped reads no more.
    pub(crate) fn stop_stream(&mut self, job: JobId) {
        self.streaming.remove(&job);
        self.transfers.retain(|t| t.kind != Kind::Stream(job));
    }

    pub(crate) fn complete(&self, node: usize, dataset: &str) -> bool {
        self.dataset_bytes(dataset) == 0
            || self.streamed(dataset)
            || self.nodes[node]
                .cache
                .get(dataset)
                .is_some_and(|c| c.complete)
    }

    /// Bytes per second of each transfer in flight: max-min fair over the links each crosses;
    /// with the guard rails, stages and streams first and prefetches on what they leave.
    fn rates(&self) -> Vec<f64> {
        let c = &self.input.cluster;
        let caps = Capacities {
            shared: c.shared_bw,
            nic: c.nic_bw,
            ssd: c.ssd_bw,
        };
        let flows: Vec<(Vec<Link>, u8)> = self
            .transfers
            .iter()
            .map(|t| {
                let mut links = match t.from {
                    Source::Shared => vec![Link::Shared],
                    Source::Peer(p) => vec![Link::NicOut(p)],
                };
                if self.guarded() {
                    links.push(Link::NicIn(t.node));
                }
                if !matches!(t.kind, Kind::Stream(_)) {
                    links.push(Link::Ssd(t.node));
                }
                let class = u8::from(self.guarded() && matches!(t.kind, Kind::Prefetch(_)));
                (links, class)
            })
            .collect();
        rates(caps, &flows)
    }

    /// Moves transfers forward by `dt` seconds; those that finish complete their cache entry,
    /// or let their streaming job run on.
    pub(crate) fn advance(&mut self, dt: f64, now: Timestamp) {
        if dt <= 0.0 || self.transfers.is_empty() {
            return;
        }
        let rates = self.rates();
        for (t, r) in self.transfers.iter_mut().zip(rates) {
            let moved = (r * dt).min(t.remaining);
            t.remaining -= moved;
            count(&mut self.counts, &mut self.shared_bytes, t, moved);
        }
        let (done, left): (Vec<Transfer>, Vec<Transfer>) =
            self.transfers.drain(..).partition(|t| t.remaining <= 0.5);
        self.transfers = left;
        for t in done {
            count(&mut self.counts, &mut self.shared_bytes, &t, t.remaining);
            if let Kind::Stream(job) = t.kind {
                // Reads overlap compute: the job ends when both are done.
                let runtime = self.streaming.remove(&job).unwrap_or(0.0);
                if let Some((start, end)) = self.running.get_mut(&job) {
                    let computed = Timestamp(start.0 + (runtime * 1000.0).round() as i64);
                    *end = computed.max(now);
                }
                continue;
            }
            self.counts.completed += 1;
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
            .filter(|(r, _)| **r > 0.0)
            .map(|(r, t)| {
                let ms = ((t.remaining / r) * 1000.0).ceil().clamp(1.0, 1e15) as i64;
                Timestamp(now.0.saturating_add(ms))
            })
            .min()
    }
}

/// Counts `bytes` moved by `t`: shared-storage bytes, and what they were for.
fn count(counts: &mut CopyCounts, shared: &mut f64, t: &Transfer, bytes: f64) {
    match (t.from, t.kind) {
        (Source::Peer(_), _) => counts.peer_bytes += bytes,
        (Source::Shared, kind) => {
            *shared += bytes;
            match kind {
                Kind::Stream(_) => counts.streamed_bytes += bytes,
                Kind::Prefetch(_) => counts.prefetch_bytes += bytes,
                Kind::Stage => {}
            }
        }
    }
}
