//! labpool turns a few GPU servers into one shared pool for a research group: it schedules GPU
//! jobs (alone, with an agent per node, or in front of the lab's Slurm), stages the datasets
//! they declare onto node-local disk, snapshots shared data nightly, keeps home and scratch
//! within quota, and runs jobs inside named software environments.
//!
//! This crate is the `labpool` binary, and nothing else: called by one of Slurm's command
//! names it is that command ([`labpool_slurm_commands`]), otherwise labpool's own command line
//! ([`labpool_cli`]). The CLI never depends on the Slurm names; this crate hands them in. The
//! layers below are checked by `layering.rs`: the controller ([`labpool_controller`], with the
//! Slurm gate), the node agent and shim ([`labpool_agent`]), the web dashboard
//! ([`labpool_web`]), the links between them ([`labpool_link`]), this machine
//! ([`labpool_host`]), the config ([`labpool_settings`]) and the wire types ([`labpool_api`]).
//! Domain logic lives in the library crates: [`labpool_scheduler`] and [`labpool_lifecycle`]
//! (the deterministic cores), [`labpool_cache`], [`labpool_snapshots`], [`labpool_quotas`],
//! [`labpool_envs`], [`labpool_cluster`] (trust between nodes) and [`labpool_monitor`].
//!
//! The modules below are the CLI's, re-exported under the paths the end-to-end tests, the
//! benchmarks and the fuzz targets use.

pub use labpool_cli::*;
pub use labpool_slurm_commands as slurm_commands;

#[cfg(test)]
mod doc_paths;
#[cfg(test)]
mod layering;

use std::process::ExitCode;

/// Runs the binary: as a Slurm command when called by one of their names, else labpool's CLI.
pub fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(code) = argv
        .first()
        .and_then(|argv0| labpool_slurm_commands::personality(argv0, &argv[1..]))
    {
        return code;
    }
    labpool_cli::main(&labpool_slurm_commands::Names)
}
