//! The engine's side of a config reload: the scheduler takes the new partitions and policy,
//! and the engine keeps the reloaded live sections in its config; everything else stays as it
//! was read at start until the next restart. Nothing is taken when the scheduler refuses the
//! new partitions.

use super::{Engine, PassNeed};
use crate::settings::Config;
use crate::settings::reload::Changes;
use labpool_scheduler::policy::Policy;
use std::sync::Arc;

impl Engine {
    /// Takes the live sections of `new`; what changed and the config now, or why nothing was
    /// taken.
    pub(crate) fn reload(&mut self, new: Config) -> Result<(Changes, Arc<Config>), String> {
        let changes = self.config.changes_to(&new);
        if changes.live.is_empty() {
            return Ok((changes, self.config.clone()));
        }
        let merged = self.config.with_live_from(&new);
        let reloaded = merged.policy();
        let policy = Policy {
            credits: reloaded.credits,
            weights: reloaded.weights,
            preemption: reloaded.preemption,
            // Placement comes from [cache] and [jobs], which wait for a restart.
            placement: self.sched.policy().placement.clone(),
        };
        self.sched
            .reconfigure(merged.scheduler_partitions(), policy)
            .map_err(|e| e.to_string())?;
        self.config = Arc::new(merged);
        self.pass_need = PassNeed::Full;
        Ok((changes, self.config.clone()))
    }
}
