//! What one read of Slurm tells the core: dataset features to set again, the view the engine
//! schedules by, and for each attempt its start, its end, a start that never came, a stop that
//! is due, or its absence (settled from accounting); and orphans to cancel.

use super::{GateCore, GateEffect, cancel};
use crate::api::agent::AgentReport;
use crate::slurm_gate::node::NodeLine;
use crate::slurm_gate::outcome::outcome_of;
use crate::slurm_gate::queue::SlurmJob;
use crate::slurm_gate::view::{FEATURE_PREFIX, feature_of, view_of};
use labpool_lifecycle::Outcome;
use labpool_scheduler::JobState;
use std::collections::BTreeMap;

/// Each attempt of `pool` by its tag; the newest Slurm job answers for an attempt that has two.
fn by_tag<'a>(jobs: &'a [SlurmJob], pool: &str) -> BTreeMap<(u64, u32), &'a SlurmJob> {
    let mut out: BTreeMap<(u64, u32), &SlurmJob> = BTreeMap::new();
    for j in jobs {
        if let Some(key) = j.labpool(pool)
            && out.get(&key).is_none_or(|o| o.job_id < j.job_id)
        {
            out.insert(key, j);
        }
    }
    out
}

impl GateCore {
    /// Keeps each node's `ds_<name>` features equal to the datasets it holds, so that plain
    /// `sbatch --prefer=ds_imagenet` users go where the data is too. Features labpool did not
    /// set are kept. `scontrol reconfig` and a slurmctld restart reset features to
    /// `slurm.conf`'s: the next read sees that and sets them again.
    fn mirror_features(&self, nodes: &[NodeLine], out: &mut Vec<GateEffect>) {
        for n in nodes {
            let Some(held) = self.holdings.get(&n.name) else {
                continue;
            };
            let have: Vec<&str> = n
                .features
                .split(',')
                .filter(|f| !f.is_empty() && *f != "(null)")
                .collect();
            let mut want: Vec<String> = have
                .iter()
                .filter(|f| !f.starts_with(FEATURE_PREFIX))
                .map(|f| f.to_string())
                .collect();
            want.extend(held.iter().map(|d| feature_of(d)));
            let mut sorted_have: Vec<String> = have.iter().map(|f| f.to_string()).collect();
            sorted_have.sort();
            let mut sorted_want = want.clone();
            sorted_want.sort();
            if sorted_have != sorted_want {
                out.push(GateEffect::SetFeatures {
                    node: n.name.clone(),
                    features: want,
                });
            }
        }
    }

    /// One read of the queue and the nodes.
    pub(super) fn observed(
        &mut self,
        queue: &[SlurmJob],
        nodes: &[NodeLine],
        now_ms: i64,
        out: &mut Vec<GateEffect>,
    ) {
        self.mirror_features(nodes, out);
        let view = view_of(nodes, queue, &self.pool);
        if self.last_view.as_ref() != Some(&view) {
            out.push(GateEffect::View(view.clone()));
            self.last_view = Some(view.clone());
        }
        let by_tag = by_tag(queue, &self.pool);
        let mut cancels = Vec::new();
        let mut release = Vec::new();
        // The jobs of a node that went down are the engine's to requeue, as a lost agent's.
        // (The queue was read first: a job that failed with its node was failed after the
        // node went DOWN, so the node shows DOWN here, and the job follows the node's rules.)
        let lost: Vec<(u64, u32)> = self
            .tracked
            .iter()
            .filter(|(_, t)| view.down.contains_key(&t.node))
            .map(|(k, _)| *k)
            .collect();
        for key in lost {
            if let Some(t) = self.tracked.remove(&key) {
                cancels.extend(t.slurm.or_else(|| by_tag.get(&key).map(|j| j.job_id)));
            }
        }
        let mut done = Vec::new();
        let mut missing = Vec::new();
        for (key, t) in self.tracked.iter_mut() {
            let (job, attempt) = *key;
            let Some(sj) = by_tag.get(key) else {
                if t.adopted || t.slurm.is_some() {
                    missing.push(*key);
                }
                continue;
            };
            let node = t.node.clone();
            if t.adopted {
                t.adopted = false;
                t.slurm = Some(sj.job_id);
                tracing::info!(job, attempt, slurm = sj.job_id, "re-adopted from Slurm");
                out.push(GateEffect::Report(AgentReport::Adopted {
                    node: node.clone(),
                    job,
                    attempt,
                }));
                if sj.job_state == "PENDING" {
                    if sj.state_reason.starts_with("JobHeld") {
                        release.push(sj.job_id);
                    }
                    // Released and pending: the start timeout counts from now.
                    t.released = Some(now_ms);
                }
            }
            // Slurm's start time is the attempt's: its elapsed time and its charge count from it.
            if sj.start_time > 0
                && (sj.holds_resources() || sj.is_final() && sj.end_time >= sj.start_time)
                && t.started_ms != Some(sj.start_time * 1000)
            {
                t.started_ms = Some(sj.start_time * 1000);
                out.push(GateEffect::Report(AgentReport::Running {
                    node: node.clone(),
                    job,
                    attempt,
                    since_ms: sj.start_time * 1000,
                }));
            }
            if sj.is_final() {
                out.push(GateEffect::Report(AgentReport::Ended {
                    node,
                    job,
                    attempt,
                    outcome: outcome_of(sj, now_ms),
                    steps: Vec::new(),
                }));
                done.push(*key);
            } else if t.kill {
                cancels.push(sj.job_id);
            } else if sj.holds_resources() {
                t.released = None;
                if t.stop_at.is_some_and(|at| now_ms >= at) {
                    t.stop_at = None;
                    cancels.push(sj.job_id);
                }
            } else if t
                .released
                .is_some_and(|at| now_ms - at > self.start_timeout_ms)
            {
                tracing::warn!(
                    job,
                    attempt,
                    slurm = sj.job_id,
                    reason = sj.state_reason,
                    "Slurm did not start it: placed again"
                );
                cancels.push(sj.job_id);
                out.push(GateEffect::Report(AgentReport::NeverStarted {
                    why: Some(format!(
                        "Slurm did not start its job {} on {node} within the start timeout ({}s, [executor] start_timeout): {}; it was cancelled there and waits to be placed again",
                        sj.job_id,
                        self.start_timeout_ms / 1000,
                        sj.state_reason
                    )),
                    node,
                    job,
                    attempt,
                }));
                done.push(*key);
            }
        }
        for key in done {
            self.tracked.remove(&key);
        }
        if !missing.is_empty() {
            out.push(GateEffect::Account(missing));
        }
        // Orphans: tagged, unfinished, on a node the gate answers for, and not tracked.
        for (key, sj) in &by_tag {
            // A multi-node job is an orphan only once all of its nodes were told what they
            // run: its batch node's list names it, its other nodes' never do.
            let names = sj.node_names();
            let node_known = !names.is_empty() && names.iter().all(|n| self.adopted.contains(n));
            if !sj.is_final() && !self.tracked.contains_key(key) && node_known {
                cancels.push(sj.job_id);
            }
        }
        if !release.is_empty() {
            out.push(GateEffect::Release(release));
        }
        cancels.sort_unstable();
        cancels.dedup();
        cancel(cancels, out);
    }

    /// Attempts Slurm's queue no longer shows, settled from its accounting: their end; an
    /// adopted attempt Slurm never saw never started (the controller stopped before sbatch),
    /// and one that Slurm forgot without a record ended FAILED, with why.
    pub(super) fn accounted(
        &mut self,
        missing: Vec<(u64, u32)>,
        records: &[SlurmJob],
        now_ms: i64,
        out: &mut Vec<GateEffect>,
    ) {
        let by_tag = by_tag(records, &self.pool);
        for key in missing {
            let Some(t) = self.tracked.remove(&key) else {
                continue;
            };
            let (job, attempt) = key;
            let node = t.node.clone();
            let report = match by_tag.get(&key) {
                Some(sj) if sj.is_final() => {
                    if sj.start_time > 0 {
                        out.push(GateEffect::Report(AgentReport::Running {
                            node: node.clone(),
                            job,
                            attempt,
                            since_ms: sj.start_time * 1000,
                        }));
                    }
                    AgentReport::Ended {
                        node,
                        job,
                        attempt,
                        outcome: outcome_of(sj, now_ms),
                        steps: Vec::new(),
                    }
                }
                _ if t.slurm.is_none() => AgentReport::NeverStarted {
                    node,
                    job,
                    attempt,
                    why: None,
                },
                _ => {
                    let id = t.slurm.unwrap_or_default();
                    let why = format!(
                        "Slurm no longer knows its job {id} and has no finished record of it"
                    );
                    tracing::warn!(job, attempt, "{why}");
                    AgentReport::Ended {
                        node,
                        job,
                        attempt,
                        outcome: Outcome::decided(JobState::Failed, now_ms, why),
                        steps: Vec::new(),
                    }
                }
            };
            out.push(GateEffect::Report(report));
        }
    }
}
