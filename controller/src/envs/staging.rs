//! Environments in the engine: a placed job whose environment is not yet on its node waits in
//! STAGING (reason `EnvStaging`) while the node unpacks it, then starts; and the isolation a
//! run gets, as its record says it.
//!
//! Decisions recorded here:
//! - Datasets are staged first, then the environment: both must be on the node before the
//!   shim starts, and the environment is usually the smaller and quicker of the two.
//! - Every attempt asks its node, even when the environment was put there before: the answer
//!   costs one `stat` there, and the controller keeps no picture of node stores that could go
//!   stale (a build removed by hand is unpacked again).
//! - A job records the environment id it was given at submit, so moving a name later never
//!   changes what a queued or running job runs with.
//! - A multi-node job asks every one of its nodes, and starts when all have answered; its
//!   notes name each node, and whether the build was unpacked there or already in place.

use crate::api::agent::{AgentOrder, LaunchEnv};
use crate::engine::Engine;
use crate::engine::answers::Answers;
use crate::jobs::JobRow;
use labpool_lifecycle::{Event, Lacks, Readiness};
use labpool_scheduler::JobState;

impl Engine {
    /// The environment a job runs inside, as its node gets it.
    pub(crate) fn launch_env(&self, row: &JobRow) -> Option<LaunchEnv> {
        let req = &row.request;
        let (id, kind) = (req.env_id.clone()?, req.env_kind?);
        Some(LaunchEnv {
            name: req.env.clone().unwrap_or_else(|| id.clone()),
            dir: self.config.env_store().join(&id),
            archive: crate::envs::archive_path(&self.config, &id),
            id,
            kind,
        })
    }

    /// True when `row`'s attempt must wait for its node to report its environment in place.
    pub(crate) fn needs_env_stage(&self, row: &JobRow) -> bool {
        row.request.env_id.is_some() && !self.envs_ready.contains(&(row.id, row.attempt))
    }

    /// Asks `node`, and every other node of a multi-node job, to put the job's environment in
    /// place.
    pub(crate) fn send_env_stage(&mut self, job: u64, attempt: u32, node: &str) {
        let Some(row) = self.jobs.job(job) else {
            return;
        };
        let Some(env) = self.launch_env(row) else {
            return;
        };
        let nodes = if row.others.is_empty() {
            vec![node.to_string()]
        } else {
            row.nodes()
        };
        if nodes.len() > 1 {
            self.env_gangs
                .insert((job, attempt), Answers::from_nodes(&nodes));
        }
        for n in &nodes {
            if let Some(link) = self.reach.orders(n) {
                let env = env.clone();
                let _ = link.send(AgentOrder::StageEnv { job, attempt, env });
            }
        }
    }

    /// Forgets what the engine knew of `job`'s environment stages (it ended or was requeued).
    pub(crate) fn forget_env_stages(&mut self, job: u64) {
        self.envs_ready.retain(|(j, _)| *j != job);
        self.env_gangs.retain(|(j, _), _| *j != job);
    }

    /// What `EnvStaging` says while a job waits.
    pub(crate) fn env_staging_detail(row: &JobRow, node: &str) -> String {
        format!(
            "putting environment {} ({}) on {node}",
            row.request.env.as_deref().unwrap_or("-"),
            row.request.env_id.as_deref().unwrap_or("-")
        )
    }

    /// What a STAGING job whose datasets are complete waits for next: its environment, or
    /// nothing (it starts).
    pub(crate) fn after_data(&self, job: u64, node: &str) -> Readiness {
        let Some(row) = self.jobs.job(job) else {
            return Readiness::Ready {
                isolation: "unknown".into(),
            };
        };
        Readiness::next(Lacks {
            data: None,
            env: self
                .needs_env_stage(row)
                .then(|| Engine::env_staging_detail(row, node)),
            isolation: self.isolation_text(node, &row.gpus, row.spec.resources.mem_mib),
        })
    }

    /// A node put an environment in place, or could not.
    pub(crate) fn on_env_staged(
        &mut self,
        node: String,
        job: u64,
        attempt: u32,
        id: String,
        result: Result<bool, String>,
    ) {
        let current = self
            .jobs
            .job(job)
            .is_some_and(|r| r.is_current(attempt, JobState::Staging));
        if !current {
            self.env_gangs.remove(&(job, attempt));
            return;
        }
        match result {
            Ok(unpacked) => {
                let gang = self.env_gangs.get_mut(&(job, attempt));
                let mut notes = match (unpacked, &gang) {
                    (true, _) => vec![format!("environment {id} unpacked on {node}")],
                    (false, Some(_)) => vec![format!("environment {id} already on {node}")],
                    (false, None) => Vec::new(),
                };
                if let Some(gang) = gang {
                    let Some(all) = gang.answered(&node, notes) else {
                        return;
                    };
                    notes = all;
                    self.env_gangs.remove(&(job, attempt));
                }
                self.envs_ready.insert((job, attempt));
                let next = self.after_data(job, &node);
                self.lifecycle(Event::Staged {
                    job,
                    attempt,
                    notes,
                    next,
                });
            }
            Err(why) => {
                self.env_gangs.remove(&(job, attempt));
                self.lifecycle(Event::StageFailed {
                job,
                attempt,
                why: format!(
                    "putting its environment {id} on {node} failed: {why}; `labpool env show` tells where the build is, an admin can rebuild it"
                ),
                retry: None,
                })
            }
        }
    }

    /// The isolation a run on `node` with `gpus` and `mem_mib` gets, in words.
    pub(crate) fn isolation_text(&self, node: &str, gpus: &[u32], mem_mib: u64) -> String {
        let Some(facts) = self.nodes_facts.get(node) else {
            return "unknown".to_string();
        };
        // The description counts the denied GPUs; their device minors are the agent's to know.
        let node_gpus: Vec<(u32, u32)> = self
            .sched
            .nodes()
            .find(|n| n.name() == node)
            .map(|n| n.spec.gpus.iter().map(|g| (g.index, g.index)).collect())
            .unwrap_or_default();
        facts
            .isolation
            .for_launch("-", node_gpus, gpus, mem_mib)
            .describe()
    }
}
