//! The environment a job sees on this node: [`job_environment`] (shared with the Slurm gate,
//! which submits the same environment to Slurm), with each dataset's directory in this node's
//! cache.

use crate::api::agent::Launch;
use std::path::PathBuf;

pub use labpool_host::job_environment::job_environment;

/// Each dataset's directory for the job: its copy in this node's cache, or for a streamed
/// dataset the shared source itself.
pub fn dataset_dirs(
    launch: &Launch,
    cache: &labpool_cache::store::NodeCache,
) -> Vec<(String, PathBuf)> {
    launch
        .datasets
        .iter()
        .map(|d| {
            let dir = match &d.stream {
                Some(shared) => shared.clone(),
                None => cache.dir(&d.name, &d.version),
            };
            (d.name.clone(), dir)
        })
        .collect()
}
