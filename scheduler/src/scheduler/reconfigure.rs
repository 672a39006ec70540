//! A new set of partitions and a new policy for a running scheduler (the controller's config
//! reloaded): jobs already queued or running keep what they were admitted with; only a
//! partition that still holds jobs cannot be taken away.

use super::Scheduler;
use crate::partition::{Partition, PartitionConfigError, check_partitions};
use crate::policy::Policy;

/// Why new partitions or a new policy were not taken; the scheduler is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconfigureError {
    /// The partitions themselves are wrong.
    #[error(transparent)]
    Partitions(#[from] PartitionConfigError),
    /// A removed partition still holds jobs.
    #[error(
        "partition '{partition}' is removed from the config but still holds jobs {jobs}: keep it until they end (or move them: labpool update JOB --partition OTHER)"
    )]
    InUse {
        /// The partition.
        partition: String,
        /// Its waiting and running jobs, comma-separated.
        jobs: String,
    },
}

impl Scheduler {
    /// Takes `partitions` and `policy` from now on; the next pass considers every job again.
    pub fn reconfigure(
        &mut self,
        partitions: Vec<Partition>,
        policy: Policy,
    ) -> Result<(), ReconfigureError> {
        check_partitions(&partitions)?;
        for old in &self.partitions {
            if partitions.iter().any(|p| p.name == old.name) {
                continue;
            }
            let jobs: Vec<String> = self
                .pending
                .values()
                .chain(self.running.values().map(|(spec, _)| spec))
                .filter(|j| j.partition == old.name)
                .map(|j| j.id.to_string())
                .collect();
            if !jobs.is_empty() {
                return Err(ReconfigureError::InUse {
                    partition: old.name.clone(),
                    jobs: jobs.join(", "),
                });
            }
        }
        self.chain = crate::placement::Chain::for_policy(&policy.placement);
        self.partitions = partitions;
        self.policy = policy;
        self.memo = None;
        Ok(())
    }
}
