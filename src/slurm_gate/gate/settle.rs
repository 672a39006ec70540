//! Attempts that left Slurm's queue while the gate was not looking: their end from Slurm's
//! accounting.

use super::Gate;
use crate::api::agent::AgentReport;
use crate::slurm_gate::outcome::outcome_of;
use crate::slurm_gate::queue::SlurmJob;
use labpool_lifecycle::Outcome;
use labpool_scheduler::JobState;
use std::collections::BTreeMap;

impl Gate {
    /// Attempts Slurm's queue no longer shows: their end from accounting; an adopted attempt
    /// Slurm never saw never started (the controller stopped before sbatch), and one that
    /// Slurm forgot without a record ended FAILED, with why.
    pub(super) async fn settle_missing(&mut self, missing: Vec<(u64, u32)>) {
        let records = match self.slurm.accounting(7).await {
            Ok(r) => r,
            Err(e) => {
                // Kept tracked and looked for again at the next poll: taking an attempt for
                // one that never started would run it twice.
                tracing::warn!("cannot read Slurm's accounting: {e}");
                return;
            }
        };
        let mut by_tag: BTreeMap<(u64, u32), &SlurmJob> = BTreeMap::new();
        for j in &records {
            if let Some(key) = j.labpool(&self.pool)
                && by_tag.get(&key).is_none_or(|o| o.job_id < j.job_id)
            {
                by_tag.insert(key, j);
            }
        }
        for key in missing {
            let Some(t) = self.tracked.remove(&key) else {
                continue;
            };
            let (job, attempt) = key;
            let node = t.node.clone();
            match by_tag.get(&key) {
                Some(sj) if sj.is_final() => {
                    if sj.start_time > 0 {
                        self.report(AgentReport::Running {
                            node: node.clone(),
                            job,
                            attempt,
                            since_ms: sj.start_time * 1000,
                        });
                    }
                    self.report(AgentReport::Ended {
                        node,
                        job,
                        attempt,
                        outcome: outcome_of(sj),
                        steps: Vec::new(),
                    });
                }
                _ if t.slurm.is_none() => {
                    self.report(AgentReport::NeverStarted {
                        node,
                        job,
                        attempt,
                        why: None,
                    });
                }
                _ => {
                    let id = t.slurm.unwrap_or_default();
                    let why = format!(
                        "Slurm no longer knows its job {id} and has no finished record of it"
                    );
                    tracing::warn!(job, attempt, "{why}");
                    self.report(AgentReport::Ended {
                        node,
                        job,
                        attempt,
                        outcome: Outcome::decided(JobState::Failed, crate::clock::now_ms(), why),
                        steps: Vec::new(),
                    });
                }
            }
        }
    }
}
