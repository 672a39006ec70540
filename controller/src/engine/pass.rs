//! The scheduling pass: what the scheduler decides goes through the lifecycle, and a placed
//! job gets its output paths and starts or waits for its stages.

use crate::api::agent::AgentOrder;
use crate::engine::{Engine, PassNeed};
use crate::jobs::JobRow;
use labpool_lifecycle::{Event, Lacks, Placement, Readiness};
use labpool_scheduler::options::{PatternValues, expand_pattern};
use labpool_scheduler::{Allocation, Decision};
use std::path::{Path, PathBuf};

/// Output file pattern when the job names none (Slurm's is `slurm-%j.out`).
pub const DEFAULT_OUTPUT: &str = "labpool-%j.out";

impl Engine {
    /// One scheduling pass, when something happened that can change a decision: its
    /// placements and reasons go through the lifecycle, so they are committed with the batch
    /// before any start reaches a node. After submits alone, the scheduler considers only the
    /// new jobs when that gives what a full pass would.
    pub(super) fn schedule(&mut self) {
        let need = std::mem::take(&mut self.pass_need);
        if matches!(need, PassNeed::Nothing) {
            return;
        }
        // Sessions whose members came back take their free GPUs before anyone else.
        self.take_back();
        let pass_time = self.clock.now();
        let view = self.pass_cache_view();
        let decisions = match need {
            PassNeed::Added(ids) => self.sched.schedule_appended(pass_time, &view, &ids),
            _ => {
                self.full_pass_at = pass_time.0;
                self.sched.schedule_with(pass_time, &view)
            }
        };
        let mut prefetches = Vec::new();
        let mut stage_ins = Vec::new();
        for d in decisions {
            match d {
                Decision::Start {
                    job, allocation, ..
                } => self.place(job.0, allocation),
                Decision::Expire { job } => {
                    let detail = match self.jobs.job(job.0).and_then(|r| r.request.deadline_ms) {
                        Some(d) => format!(
                            "its time limit no longer fits before its --deadline ({}); it never started",
                            crate::clock::when(d)
                        ),
                        None => "its --deadline could no longer be met".to_string(),
                    };
                    self.lifecycle(Event::Expire { job: job.0, detail })
                }
                Decision::Wait { job, reason } => self.lifecycle(Event::Waiting {
                    job: job.0,
                    code: reason.code,
                    detail: reason.detail,
                }),
                Decision::Prefetch {
                    job, node, dataset, ..
                } => prefetches.push((job.0, node, dataset)),
                Decision::StageIn {
                    job,
                    node,
                    datasets,
                } => stage_ins.push((job.0, node, datasets)),
                Decision::Preempt { job, by, cause } => self.lifecycle(Event::Preempt {
                    job: job.0,
                    by: by.0,
                    cause,
                }),
            }
        }
        self.pin_held(&stage_ins);
        self.prefetch(prefetches);
        self.stage_in(stage_ins);
    }

    /// The scheduler placed `job`: it starts, or waits for its datasets or environment.
    fn place(&mut self, job: u64, allocation: Allocation) {
        let Some(row) = self.jobs.job(job) else {
            tracing::error!(job, "a scheduled job is not active");
            return;
        };
        let (stdout, stderr) = output_paths(row, &allocation.node);
        let datasets = row.spec.datasets.clone();
        let (versions, mut complete) = self.placement_versions(&datasets, &allocation.node);
        // A multi-node job's datasets must be on every one of its nodes.
        for other in &allocation.others {
            complete &= self.placement_versions(&datasets, &other.node).1;
        }
        if !versions.is_empty() {
            self.outbox.job_datasets(job, versions.clone());
            self.data.job_versions.insert(job, versions.clone());
        }
        // Prefetches for it on other nodes are wasted now: those still queued are dropped.
        let mut on = vec![allocation.node.as_str()];
        on.extend(allocation.others.iter().map(|o| o.node.as_str()));
        for node in self.data.prefetched_on.remove(&job).unwrap_or_default() {
            if !on.contains(&node.as_str())
                && let Some(link) = self.reach.orders(&node)
            {
                let _ = link.send(AgentOrder::DropPrefetch { job });
            }
        }
        let row = self.jobs.job(job).expect("checked above");
        let data = (!complete).then(|| {
            let what = versions
                .iter()
                .map(|(n, v)| format!("{n}@{}", crate::api::data::short(v)))
                .collect::<Vec<_>>()
                .join(", ");
            format!("staging {what}")
        });
        // A new attempt has no environment in place yet. A node no agent serves has nothing
        // that could unpack one: the gate starts the job as it is.
        let env = (row.request.env_id.is_some() && !self.has_no_cache(&allocation.node))
            .then(|| Engine::env_staging_detail(row, &allocation.node));
        let isolation = self.isolation_text(&allocation.node, &allocation.gpus, allocation.mem_mib);
        let ready = Readiness::next(Lacks {
            data,
            env,
            isolation,
        });
        let placement = Placement {
            node: allocation.node,
            gpus: allocation.gpus,
            stdout,
            stderr,
            others: allocation.others,
            ports: allocation.ports,
        };
        self.lifecycle(Event::Placed {
            job,
            placement,
            ready,
        });
    }
}

/// The job's output files, patterns expanded and taken relative to its working directory.
fn output_paths(row: &JobRow, node: &str) -> (PathBuf, PathBuf) {
    let values = PatternValues::batch(
        row.id,
        &row.spec.name,
        &row.spec.user,
        node,
        row.spec.array.as_ref().map(|a| (a.array_id.0, a.task)),
    );
    let req = &row.request;
    let resolve = |pattern: &str| -> PathBuf {
        let p = Path::new(&expand_pattern(pattern, &values)).to_path_buf();
        if p.is_absolute() {
            p
        } else {
            req.workdir.join(p)
        }
    };
    let stdout = resolve(req.output.as_deref().unwrap_or(DEFAULT_OUTPUT));
    let stderr = req.error.as_deref().map_or_else(|| stdout.clone(), resolve);
    (stdout, stderr)
}
