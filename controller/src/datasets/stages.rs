//! Stages of a placed job's datasets: the orders sent to nodes, their progress and end reports,
//! node inventories, and the stages resumed after a restart.

use crate::api::agent::{
    AgentOrder, LaunchDataset, StageFailure, StageFor, StageItem, StageOrder, Staged,
};
use crate::api::data::short;
use crate::datasets::NodeCacheState;
use crate::engine::Engine;
use crate::engine::answers::Answers;
use labpool_cache::store::{Inventory, Progress};
use labpool_lifecycle::{Event, StageKind};
use labpool_scheduler::JobState;
use labpool_scheduler::reason::STAGE_IN;

impl Engine {
    /// Sends a stage order for `versions` to `node`'s agent.
    pub(super) fn send_stage(
        &mut self,
        node: &str,
        purpose: StageFor,
        versions: &[(String, String)],
    ) {
        let mut items: Vec<StageItem> = Vec::new();
        for (name, version) in versions {
            let Some(source) = self.data.datasets.get(name).map(|d| d.path.clone()) else {
                continue;
            };
            let peers = if self.data.complete_on(node, name, version) {
                Vec::new()
            } else {
                self.peers_for(node, name, version)
            };
            items.push(StageItem {
                name: name.clone(),
                version: version.clone(),
                source,
                manifest: self.data.manifest_path(name, version),
                peers,
            });
        }
        if !matches!(purpose, StageFor::Job { .. }) {
            for i in &items {
                self.data
                    .background
                    .insert((node.to_string(), i.name.clone(), i.version.clone()));
            }
        }
        let order = StageOrder {
            purpose,
            items,
            pinned: self.pins(node).into_keys().collect(),
            next_use: self.next_use(),
        };
        match self.reach.orders(node) {
            Some(link) => {
                let _ = link.send(AgentOrder::Stage(Box::new(order)));
            }
            None => tracing::error!(node, "no agent for node"),
        }
    }

    /// The versions a job placed on `node` gets, and whether they are all there already.
    pub(crate) fn placement_versions(
        &self,
        datasets: &[String],
        node: &str,
    ) -> (Vec<(String, String)>, bool) {
        if self.has_no_cache(node) {
            // Over Slurm, a node no agent serves reads every dataset from the shared storage.
            return (Vec::new(), true);
        }
        let versions = self.data.current(datasets);
        let complete = versions
            .iter()
            .all(|(n, v)| self.data.complete_on(node, n, v));
        (versions, complete)
    }

    /// After a placed job is recorded STAGING: asks its node to stage what it lacks.
    pub(crate) fn start_staging(&mut self, job: u64, attempt: u32, node: &str) {
        // All of them: a version the last inventory showed complete may have gone since, and
        // staging a complete one costs nothing.
        let versions = self
            .data
            .job_versions
            .get(&job)
            .cloned()
            .unwrap_or_default();
        // A multi-node job stages on every one of its nodes; it starts when all are done.
        let nodes = match self.jobs.job(job) {
            Some(row) if !row.others.is_empty() => row.nodes(),
            _ => vec![node.to_string()],
        };
        if nodes.len() > 1 {
            self.data
                .gang_stages
                .insert((job, attempt), Answers::from_nodes(&nodes));
        }
        for n in nodes {
            self.send_stage(&n, StageFor::Job { job, attempt }, &versions);
        }
    }

    /// The datasets of a launch: the versions the job was given, and whether they were staged
    /// before it was placed.
    pub(crate) fn launch_datasets(&self, job: u64, hit: bool) -> Vec<LaunchDataset> {
        let mut out: Vec<LaunchDataset> = self
            .data
            .job_versions
            .get(&job)
            .into_iter()
            .flatten()
            .map(|(name, version)| LaunchDataset {
                name: name.clone(),
                version: version.clone(),
                hit,
                stream: None,
            })
            .collect();
        // Streamed datasets: the shared source itself (those given a version at placement are
        // staged, whatever the caches say now). On a node without a cache, every one is.
        let row = self.jobs.job(job);
        let no_cache = row
            .and_then(|r| r.node.as_deref())
            .is_some_and(|n| self.has_no_cache(n));
        let datasets = row.map(|r| r.spec.datasets.clone());
        for name in datasets.unwrap_or_default() {
            if (no_cache || self.data.streamed(&name))
                && !out.iter().any(|d| d.name == name)
                && let Some(row) = self.data.datasets.get(&name)
            {
                out.push(LaunchDataset {
                    name,
                    version: row.current.clone(),
                    hit: false,
                    stream: Some(row.path.clone()),
                });
            }
        }
        out
    }

    /// A stage made progress: a staging job's reason says how far.
    pub(crate) async fn on_staging(
        &mut self,
        node: String,
        purpose: StageFor,
        name: String,
        version: String,
        progress: Progress,
    ) -> anyhow::Result<()> {
        let detail = describe_progress(&name, &version, &progress);
        if progress.rate > 0.0 {
            let old = self.data.stage_rate.unwrap_or(progress.rate);
            self.data.stage_rate = Some(0.8 * old + 0.2 * progress.rate);
        }
        let node_name = node.clone();
        self.data
            .progress
            .insert((node, purpose), (name, version, progress));
        match purpose {
            StageFor::Job { job, attempt } => self.lifecycle(Event::StageProgress {
                job,
                attempt,
                detail,
            }),
            // A job held for its data says how far the copy is, and where.
            StageFor::StageIn { job } => self.lifecycle(Event::Waiting {
                job,
                code: STAGE_IN.to_string(),
                detail: format!("{detail}; it takes its GPUs on {node_name} when the copy ends"),
            }),
            StageFor::Prefetch { .. } | StageFor::WarmUp => {}
        }
        Ok(())
    }

    /// A stage ended. A staging job starts, waits again (no room) or fails.
    pub(crate) async fn on_staged(
        &mut self,
        node: String,
        purpose: StageFor,
        versions: Vec<(String, String)>,
        result: Result<Vec<Staged>, StageFailure>,
    ) -> anyhow::Result<()> {
        self.data.progress.remove(&(node.clone(), purpose));
        // A stage that put something in place may have freed room; a dropped prefetch did not.
        if result.as_ref().is_ok_and(|staged| !staged.is_empty()) {
            self.data.unblock(&node);
        }
        for (name, version) in versions {
            let key = (node.clone(), name, version);
            self.data.background.remove(&key);
            match &result {
                Ok(staged) => {
                    self.data.failures.remove(&key);
                    if staged.iter().any(|s| s.name == key.1 && s.version == key.2) {
                        self.data.landed.insert(key);
                    }
                }
                Err(StageFailure::NoRoom(why) | StageFailure::Failed(why)) => {
                    if !matches!(purpose, StageFor::Job { .. }) {
                        self.data.failures.insert(key, why.clone());
                    }
                }
            }
        }
        let (job, attempt) = match purpose {
            StageFor::Job { job, attempt } => (job, attempt),
            StageFor::Prefetch { .. } | StageFor::WarmUp | StageFor::StageIn { .. } => {
                // A held job takes its GPUs once its data is in: a pass is due now. What was
                // copied goes into its log, as for a job's own stage.
                if let StageFor::StageIn { job } = purpose {
                    self.pass_need = crate::engine::PassNeed::Full;
                    if let Ok(staged) = &result {
                        let notes = staged_notes(&node, staged);
                        self.lifecycle(Event::StagedIn { job, notes });
                    }
                }
                if let Err(e) = result {
                    tracing::warn!(node, ?purpose, "background stage failed: {e:?}");
                }
                return Ok(());
            }
        };
        let current = self
            .jobs
            .job(job)
            .is_some_and(|r| r.is_current(attempt, JobState::Staging));
        if !current {
            // Cancelled while staging: the data stays cached for the next job.
            self.data.gang_stages.remove(&(job, attempt));
            return Ok(());
        }
        match result {
            Ok(staged) => {
                let mut notes = staged_notes(&node, &staged);
                if let Some(gang) = self.data.gang_stages.get_mut(&(job, attempt)) {
                    let Some(all) = gang.answered(&node, notes) else {
                        return Ok(());
                    };
                    notes = all;
                    self.data.gang_stages.remove(&(job, attempt));
                }
                let next = self.after_data(job, &node);
                self.lifecycle(Event::Staged {
                    job,
                    attempt,
                    notes,
                    next,
                });
            }
            Err(StageFailure::NoRoom(why)) => {
                self.data.gang_stages.remove(&(job, attempt));
                if let Some(row) = self.jobs.job(job) {
                    for d in &row.spec.datasets {
                        self.data.blocked.insert((node.clone(), d.clone()));
                    }
                }
                self.lifecycle(Event::StageFailed {
                    job,
                    attempt,
                    why: format!("the cache on {node} cannot take this job's datasets: {why}"),
                    retry: Some("CacheFull".into()),
                });
            }
            Err(StageFailure::Failed(why)) => {
                self.data.gang_stages.remove(&(job, attempt));
                self.lifecycle(Event::StageFailed {
                    job,
                    attempt,
                    why: format!("staging its datasets on {node} failed: {why}"),
                    retry: None,
                })
            }
        }
        Ok(())
    }

    /// A node reported its cache.
    pub(crate) fn on_inventory(&mut self, node: String, capacity: u64, inventory: Inventory) {
        let node_name = node.clone();
        self.data.landed.retain(|(n, _, _)| *n != node_name);
        self.data.caches.insert(
            node,
            NodeCacheState {
                capacity,
                inventory,
            },
        );
        // A job held for its data there may take its GPUs now.
        if self.data.predicted.contains_key(&node_name) {
            self.pass_need = crate::engine::PassNeed::Full;
        }
        self.tell_gate_holdings();
    }

    /// Restart: staging jobs resume their stages (the node's journal skips what is done).
    pub(crate) async fn restore_data(&mut self) -> anyhow::Result<()> {
        for d in self.db.datasets().await? {
            self.data.datasets.insert(d.name.clone(), d);
        }
        self.data.job_versions = self.db.active_job_datasets().await?;
        let staging: Vec<(u64, u32, String)> = self
            .jobs
            .jobs()
            .map(|(_, r)| r)
            .filter(|r| r.state == JobState::Staging)
            .filter_map(|r| Some((r.id, r.attempt, r.node.clone()?)))
            .collect();
        for (job, attempt, node) in staging {
            tracing::info!(
                job,
                node,
                "resuming the stage of a job placed before the restart"
            );
            self.outbox.stage(job, attempt, &node, StageKind::Data);
        }
        for link in self.reach.all_orders() {
            let _ = link.send(AgentOrder::Inventory);
        }
        Ok(())
    }
}

/// `imagenet@1a2b3c4d: 45% (1.2G of 2.7G, 3000 of 10000 files) at 120M/s`.
pub fn describe_progress(name: &str, version: &str, p: &Progress) -> String {
    let pct = (p.bytes_done * 100)
        .checked_div(p.bytes_total)
        .unwrap_or(100);
    format!(
        "{name}@{}: {pct}% ({} of {}, {} of {} files) at {}",
        short(version),
        labpool_units::format_size(p.bytes_done),
        labpool_units::format_size(p.bytes_total),
        p.files_done,
        p.files_total,
        labpool_units::format_rate(p.rate)
    )
}

/// The lines a job's log gets for what a stage on `node` copied, one per version.
fn staged_notes(node: &str, staged: &[crate::api::agent::Staged]) -> Vec<String> {
    staged
        .iter()
        .map(|s| {
            let r = &s.report;
            format!(
                "{}@{} on {node}: copied {} ({}), linked {} unchanged ({}), reused {} in place ({}), resumed {}",
                s.name,
                short(&s.version),
                labpool_units::count(r.files_copied, "file"),
                labpool_units::format_size(r.bytes_copied),
                r.files_linked,
                labpool_units::format_size(r.bytes_linked),
                r.files_reused,
                labpool_units::format_size(r.bytes_reused),
                r.files_resumed
            )
        })
        .collect()
}
