//! Nodes that stop answering: late heartbeats declare a node DOWN; a node that registers again is
//! told what it should run and sent again what its jobs wait for.

use crate::api::agent::AgentOrder;
use crate::engine::{Engine, PassNeed};
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

    /// Shows not responding every remote node that missed three heartbeats or takes no
    /// orders, and answering again every one that came back; declares DOWN every one silent,
    /// or unreachable, for `node_timeout`.
    pub(crate) async fn check_nodes(&mut self) -> anyhow::Result<()> {
        let timeout = self.config.controller.node_timeout.as_millis() as i64;
        let timeout_text = labpool_units::format_duration(self.config.controller.node_timeout);
        let now = self.clock.now_ms();
        let mut down: Vec<(String, String)> = Vec::new();
        for (name, n) in self.reach.remote.iter_mut().filter(|(_, n)| !n.down) {
            let silent = now - n.last_seen_ms;
            if silent > timeout {
                let reason = if n.instance.is_empty() {
                    format!(
                        "its agent did not register within node_timeout ({timeout_text}) of the controller's restart"
                    )
                } else {
                    format!(
                        "no heartbeat since {} (node_timeout {timeout_text})",
                        crate::clock::when(n.last_seen_ms)
                    )
                };
                down.push((name.clone(), reason));
                continue;
            }
            let link = n
                .link_trouble
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let why = if n.instance.is_empty() {
                // Still waiting to register after a restart: shown DOWN with that reason.
                None
            } else if silent > n.late_after_ms {
                Some(format!(
                    "not responding: no heartbeat since {} (its agent sends one every {}); DOWN after node_timeout ({timeout_text})",
                    crate::clock::when(n.last_seen_ms),
                    labpool_units::format_duration(std::time::Duration::from_millis(
                        (n.late_after_ms / 3) as u64
                    )),
                ))
            } else if let Some(e) = link.error {
                Some(format!(
                    "not responding: orders cannot be delivered to its agent at {} ({e}); set listen or advertise under [agent] to an address the controller reaches",
                    n.address
                ))
            } else if !link.delivered {
                Some(super::agents::first_orders_pending(&n.address))
            } else {
                None
            };
            match (&n.not_responding, why) {
                (None, None) => {}
                (Some((_, since)), Some(_)) if now - since > timeout => {
                    down.push((
                        name.clone(),
                        format!(
                            "its orders could not be delivered to {} for node_timeout ({timeout_text})",
                            n.address
                        ),
                    ));
                }
                // The same trouble (an error's words may change from one retry to the next).
                (Some((old, _)), Some(new)) if old.split('(').next() == new.split('(').next() => {}
                (was, Some(new)) => {
                    tracing::warn!(node = %name, "{new}");
                    let since = was.as_ref().map_or(now, |(_, s)| *s);
                    self.sched.set_node_not_responding(name, Some(new.clone()));
                    n.not_responding = Some((new, since));
                    self.pass_need = PassNeed::Full;
                }
                (Some(_), None) => {
                    tracing::info!(node = %name, "responding again");
                    self.sched.set_node_not_responding(name, None);
                    n.not_responding = None;
                    self.pass_need = PassNeed::Full;
                }
            }
        }
        for (node, reason) in down {
            self.node_down(&node, &reason);
        }
        Ok(())
    }

    /// The node is DOWN: no orders go to it, and its jobs are requeued or failed.
    fn node_down(&mut self, node: &str, reason: &str) {
        self.pass_need = PassNeed::Full;
        tracing::warn!(node, reason, "node DOWN");
        self.sched.set_node_down(node, Some(reason.to_string()));
        self.sched.set_node_not_responding(node, None);
        self.reach.disconnect(node);
        if let Some(n) = self.reach.remote.get_mut(node) {
            n.down = true;
            n.not_responding = None;
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
        if let Some(gate) = &self.reach.gate {
            let _ = gate.send(crate::slurm_gate::GateOrder::NodeLost(node.to_string()));
        }
    }
}
