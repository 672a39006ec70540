//! labpool turns a few GPU servers into one shared pool for a research group: it schedules GPU
//! jobs (alone, with an agent per node, or in front of the lab's Slurm), stages the datasets
//! they declare onto node-local disk, snapshots shared data nightly, keeps home and scratch
//! within quota, and runs jobs inside named software environments.
//!
//! This crate is the `labpool` binary's wiring: the CLI, config, the controller daemon, the node
//! agent and the per-job shim, Slurm's command personalities and the Slurm gate. Domain logic
//! lives in the workspace's library crates: [`labpool_scheduler`] and [`labpool_lifecycle`]
//! (the deterministic cores), [`labpool_cache`], [`labpool_snapshots`], [`labpool_quotas`],
//! [`labpool_envs`], [`labpool_cluster`] (trust between nodes) and [`labpool_monitor`].

pub mod agent;
pub use labpool_api as api;
pub mod atomic_file;
pub mod begin;
pub mod cli;
pub mod client;
pub mod clock;
pub mod commands;
pub mod controller;
pub mod discovery;
#[cfg(test)]
mod doc_paths;
pub mod embedded;
pub mod env_vars;
pub mod homes;
pub mod http1;
pub mod identity;
#[cfg(test)]
mod layering;
pub mod link_auth;
pub mod member_file;
pub mod memory;
pub mod metrics_http;
pub mod progress;
pub mod render;
pub mod retry;
pub use labpool_settings::schedule;
pub mod session;
pub use labpool_settings as settings;
pub mod shim;
pub mod slurm_commands;
pub mod slurm_gate;
#[cfg(test)]
#[cfg(test)]
pub(crate) mod small_fs;
pub mod snapshot_copies;
pub mod socket;
pub mod transport;
pub mod web;
pub mod webhook;
pub mod when;

use clap::Parser;
use std::process::ExitCode;

/// Parses the command line, runs it, and maps the result to an exit code: 0 on success, 1 on
/// an error (printed with its hint), 2 on a usage error.
pub fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(code) = argv
        .first()
        .and_then(|argv0| slurm_commands::personality(argv0, &argv[1..]))
    {
        return code;
    }
    let cli = cli::Cli::parse();
    match commands::dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
