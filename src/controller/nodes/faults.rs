//! Nodes that stop answering: late heartbeats declare a node DOWN; a node that registers again is
//! told what it should run and sent again what its jobs wait for.

use crate::api::agent::AgentOrder;
use crate::controller::engine::{Engine, PassNeed};
use labpool_lifecycle::{Event, StageKind};
use labpool_scheduler::JobState;

impl Engine {
    /// Tells a (re)connected node what it should be running, and gives it again what its jobs
    /// wait for: stages, environment stages and cancels.
    pub(super) fn resend_to(&mut self, node: &str) {
        self.outbox.order(node, AgentOrder::Inventory);
        self.lifecycle(Event::NodeUp {
            node: node.to_string(),
        });
        let staging: Vec<(u64, u32)> = self
            .jobs
            .jobs()
            .map(|(_, r)| r)
            .filter(|r| r.node.as_deref() == Some(node) && r.state == JobState::Staging)
            .map(|r| (r.id, r.attempt))
            .collect();
        for (job, attempt) in staging {
            let data_done = self
                .data
                .job_versions
                .get(&job)
                .is_none_or(|v| v.iter().all(|(n, ver)| self.data.complete_on(node, n, ver)));
            let env_needed = self.jobs.job(job).is_some_and(|r| self.needs_env_stage(r));
            let kind = if data_done && env_needed {
                StageKind::Env
            } else {
                StageKind::Data
            };
            self.outbox.stage(job, attempt, node, kind);
        }
    }

    /// Declares DOWN every remote node whose last sign of life is older than `node_timeout`.
    pub(crate) async fn check_nodes(&mut self) -> anyhow::Result<()> {
        let timeout = self.config.controller.node_timeout.as_millis() as i64;
        let now = self.clock.now_ms();
        let late: Vec<(String, i64, bool)> = self
            .remote
            .iter()
            .filter(|(_, n)| !n.down && now - n.last_seen_ms > timeout)
            .map(|(name, n)| (name.clone(), n.last_seen_ms, n.instance.is_empty()))
            .collect();
        for (node, last, never) in late {
            let timeout_text = labpool_units::format_duration(self.config.controller.node_timeout);
            let reason = if never {
                format!(
                    "its agent did not register within node_timeout ({timeout_text}) of the controller's restart"
                )
            } else {
                format!(
                    "no heartbeat since {} (node_timeout {timeout_text})",
                    crate::clock::short(last)
                )
            };
            self.node_down(&node, &reason);
        }
        Ok(())
    }

    /// The node is DOWN: no orders go to it, and its jobs are requeued or failed.
    fn node_down(&mut self, node: &str, reason: &str) {
        self.pass_need = PassNeed::Full;
        tracing::warn!(node, reason, "node DOWN");
        self.sched
            .set_node_down(node, Some(format!("DOWN: {reason}")));
        self.agents.remove(node);
        if let Some(n) = self.remote.get_mut(node) {
            n.down = true;
        }
        // Its stages, and the stages it served, will not report an end.
        self.data
            .peer_serving
            .retain(|(target, _, _), source| target != node && source != node);
        self.lifecycle(Event::NodeDown {
            node: node.to_string(),
            reason: reason.to_string(),
        });
        // Over Slurm the job may still run there: the attempts just requeued are cancelled in
        // Slurm, as an agent's are fenced, so none runs twice.
        if let Some(gate) = &self.gate {
            let _ = gate.send(crate::slurm_gate::GateOrder::NodeLost(node.to_string()));
        }
    }
}
