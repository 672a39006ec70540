//! `why`: what a job waits for, or what it is doing, with the limits and stages that judge it.

use crate::api::WhyView;
use crate::clock::when;
use crate::engine::Engine;
use crate::error::ApiError;
use labpool_scheduler::{JobId, JobState};

impl Engine {
    /// What preemption means for a running job, for `why`: told to stop, preemptible and why,
    /// or nothing.
    fn preemption_summary(&self, id: u64) -> String {
        let now = labpool_scheduler::Timestamp(self.clock.now_ms());
        if let Some(n) = self.sched.notice(JobId(id)) {
            return format!(
                "; told to stop for job {} ({}), then requeued",
                n.by.0, n.cause
            );
        }
        match self.sched.preemptible_cause(JobId(id), now) {
            Some(cause) => format!(
                "; preemptible ({cause}): it gives its GPUs back on notice when an emergency or in-credit job within its share needs them"
            ),
            None => String::new(),
        }
    }

    /// `; its node is not responding: …` for a job on a node that stopped answering.
    fn node_trouble(&self, node: Option<&str>) -> String {
        node.and_then(|n| self.sched.node(n))
            .and_then(|n| n.not_responding.as_deref())
            .map_or(String::new(), |why| format!("; its node is {why}"))
    }

    /// The nodes that take no new job and why (down, not responding, draining), for `why`.
    fn nodes_taking_none(&self) -> Vec<String> {
        self.sched
            .nodes()
            .filter(|n| !n.accepts_jobs())
            .map(|n| {
                let why = n
                    .down
                    .as_deref()
                    .map(|d| format!("DOWN: {d}"))
                    .or_else(|| n.not_responding.clone())
                    .or_else(|| n.drain.as_deref().map(|d| format!("draining: {d}")))
                    .unwrap_or_default();
                format!("{} ({why})", n.name())
            })
            .collect()
    }

    /// Why a job waits (or what it is doing). The outer error is the database's.
    pub(crate) async fn why(&self, id: u64) -> anyhow::Result<Result<WhyView, ApiError>> {
        let filters = self
            .sched
            .chain()
            .filter_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let scorers = self
            .sched
            .chain()
            .scorer_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let limits = |job: &labpool_scheduler::JobSpec| self.sched.limits_for(job).describe();
        if let Some(row) = self.jobs.job(id) {
            let summary = match row.state {
                JobState::Pending => match self.sched.explain(JobId(id)) {
                    Some(n) => format!("waits: {}", n.reason),
                    None => "waits for the next scheduling pass".to_string(),
                },
                JobState::Staging => format!(
                    "placed on {} with GPUs {:?}; its clock starts when its datasets are staged: {}",
                    row.node.as_deref().unwrap_or("?"),
                    row.gpus,
                    row.reason_detail.as_deref().unwrap_or("staging")
                ),
                _ => format!(
                    "runs on {} with GPUs {:?} since {}{}{}",
                    row.node.as_deref().unwrap_or("?"),
                    row.gpus,
                    row.start_time.map(when).unwrap_or_default(),
                    self.preemption_summary(id),
                    self.node_trouble(row.node.as_deref())
                ),
            };
            return Ok(Ok(WhyView {
                id,
                state: row.state,
                note: self.sched.explain(JobId(id)).cloned(),
                limits: limits(&row.spec),
                filters,
                scorers,
                summary,
                warnings: self.data.stream_notes(&row.spec.datasets),
                nodes_off: if row.state == JobState::Pending {
                    self.nodes_taking_none()
                } else {
                    Vec::new()
                },
                advice: None,
            }));
        }
        match self.db.job(id).await? {
            Some(row) => Ok(Ok(WhyView {
                id,
                state: row.state,
                note: None,
                limits: limits(&row.spec),
                filters,
                scorers,
                summary: format!(
                    "ended {} ({}){}",
                    row.end_time.map(when).unwrap_or_default(),
                    row.state,
                    row.reason_detail
                        .as_ref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                ),
                warnings: Vec::new(),
                nodes_off: Vec::new(),
                advice: None,
            })),
            None => Ok(Err(ApiError::not_found(
                format!("no job {id}"),
                Some("`labpool queue` lists jobs".to_string()),
            ))),
        }
    }
}
