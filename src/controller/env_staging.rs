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

use crate::agent::protocol::{AgentOrder, LaunchEnv, Outcome};
use crate::clock::now_ms;
use crate::controller::db::{Db, JobRow};
use crate::controller::engine::Engine;
use labpool_scheduler::{JobId, JobState, Timestamp};

impl Engine {
    /// The environment a job runs inside, as its node gets it.
    pub(crate) fn launch_env(&self, row: &JobRow) -> Option<LaunchEnv> {
        let req = &row.request;
        let (id, kind) = (req.env_id.clone()?, req.env_kind?);
        Some(LaunchEnv {
            name: req.env.clone().unwrap_or_else(|| id.clone()),
            dir: self.config.env_store().join(&id),
            archive: crate::controller::envs::archive_path(&self.config, &id),
            id,
            kind,
        })
    }

    /// True when `row`'s attempt must wait for its node to report its environment in place.
    pub(crate) fn needs_env_stage(&self, row: &JobRow) -> bool {
        row.request.env_id.is_some() && !self.envs_ready.contains(&(row.id, row.attempt))
    }

    /// Asks `node` to put the job's environment in place.
    pub(crate) fn send_env_stage(&self, job: u64, attempt: u32, node: &str) {
        let Some(env) = self.active.get(&job).and_then(|r| self.launch_env(r)) else {
            return;
        };
        if let Some(link) = self.agents.get(node) {
            let _ = link.send(AgentOrder::StageEnv { job, attempt, env });
        }
    }

    /// What `EnvStaging` says while a job waits.
    pub(crate) fn env_staging_detail(row: &JobRow, node: &str) -> String {
        format!(
            "putting environment {} ({}) on {node}",
            row.request.env.as_deref().unwrap_or("-"),
            row.request.env_id.as_deref().unwrap_or("-")
        )
    }

    /// A STAGING job whose datasets are complete: it waits for its environment, or starts.
    pub(crate) async fn run_staged(
        &mut self,
        job: u64,
        attempt: u32,
        node: &str,
    ) -> anyhow::Result<()> {
        let Some(row) = self.active.get(&job) else {
            return Ok(());
        };
        if self.needs_env_stage(row) {
            let detail = Engine::env_staging_detail(row, node);
            let mut tx = self.db.begin().await?;
            Db::set_reason(&mut tx, job, "EnvStaging", &detail).await?;
            tx.commit().await?;
            let row = self.active.get_mut(&job).expect("checked above");
            row.reason = Some("EnvStaging".into());
            row.reason_detail = Some(detail);
            self.send_env_stage(job, attempt, node);
            return Ok(());
        }
        let now_ms = now_ms();
        let row = self.active.get(&job).expect("checked above");
        let (stdout, stderr) = (
            row.stdout.clone().unwrap_or_default(),
            row.stderr.clone().unwrap_or_default(),
        );
        let isolation = self.isolation_text(node, &row.gpus, row.spec.resources.mem_mib);
        let mut tx = self.db.begin().await?;
        Db::mark_started(
            &mut tx, job, node, &row.gpus, attempt, now_ms, &stdout, &stderr,
        )
        .await?;
        Db::set_isolation(&mut tx, job, &isolation).await?;
        tx.commit().await?;
        let row = self.active.get_mut(&job).expect("checked above");
        row.state = JobState::Running;
        row.start_time = Some(now_ms);
        row.reason = None;
        row.reason_detail = None;
        row.isolation = Some(isolation);
        let row = row.clone();
        self.sched.set_started(JobId(job), Timestamp(now_ms));
        let alloc = self
            .sched
            .running()
            .find(|(j, _)| j.id.0 == job)
            .map(|(_, a)| a.clone())
            .expect("a staging job holds an allocation");
        let (node, launch) = self.launch(&row, &alloc, stdout, stderr, false);
        if let Some(link) = self.agents.get(&node) {
            let _ = link.send(AgentOrder::Start(Box::new(launch)));
        }
        Ok(())
    }

    /// A node put an environment in place, or could not.
    pub(crate) async fn on_env_staged(
        &mut self,
        node: String,
        job: u64,
        attempt: u32,
        id: String,
        result: Result<bool, String>,
    ) -> anyhow::Result<()> {
        let current = self
            .active
            .get(&job)
            .is_some_and(|r| r.state == JobState::Staging && r.attempt == attempt);
        match result {
            Ok(unpacked) => {
                if !current {
                    return Ok(());
                }
                self.envs_ready.insert((job, attempt));
                if unpacked {
                    let mut tx = self.db.begin().await?;
                    let detail = format!("environment {id} unpacked on {node}");
                    Db::event(&mut tx, job, now_ms(), "staged", Some(&detail)).await?;
                    tx.commit().await?;
                }
                self.run_staged(job, attempt, &node).await
            }
            Err(why) if current => {
                self.fail_staged(
                    job,
                    format!(
                        "putting its environment {id} on {node} failed: {why}; `labpool env show` tells where the build is, an admin can rebuild it"
                    ),
                )
                .await
            }
            Err(_) => Ok(()),
        }
    }

    /// A STAGING job whose data or environment could not be put on its node ends FAILED; its
    /// time never started, so it is not charged.
    pub(crate) async fn fail_staged(&mut self, job: u64, reason: String) -> anyhow::Result<()> {
        let now_ms = now_ms();
        self.sched.set_started(JobId(job), Timestamp(now_ms));
        let outcome = Outcome {
            state: JobState::Failed,
            exit_code: None,
            signal: None,
            end_time_ms: now_ms,
            reason: Some(reason),
        };
        self.record_end(job, outcome).await?;
        self.data.job_versions.remove(&job);
        Ok(())
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
