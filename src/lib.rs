//! labpool turns a few GPU servers into one shared pool for a research group: it schedules GPU
//! jobs (alone, with an agent per node, or in front of the lab's Slurm), stages the datasets
//! they declare onto node-local disk, snapshots shared data nightly, keeps home and scratch
//! within quota, and runs jobs inside named software environments.
//!
//! This crate is the `labpool` binary: the CLI and its commands, Slurm's command names and
//! interactive sessions. It wires the layers below it (see `layering.rs`): the controller
//! ([`labpool_controller`], with the Slurm gate), the node agent and shim ([`labpool_agent`]),
//! the web dashboard ([`labpool_web`]), the links between them ([`labpool_link`]), this machine
//! ([`labpool_host`]), the config ([`labpool_settings`]) and the wire types ([`labpool_api`]).
//! Domain logic lives in the library crates: [`labpool_scheduler`] and [`labpool_lifecycle`]
//! (the deterministic cores), [`labpool_cache`], [`labpool_snapshots`], [`labpool_quotas`],
//! [`labpool_envs`], [`labpool_cluster`] (trust between nodes) and [`labpool_monitor`].

pub use labpool_agent as agent;
pub use labpool_api as api;
pub use labpool_host::atomic_file;
pub mod begin;
pub mod cli;
pub use labpool_host::clock;
pub use labpool_link::client;
pub mod commands;
pub use labpool_controller as controller;
pub use labpool_host::discovery;
#[cfg(test)]
mod doc_paths;
pub use labpool_host::env_vars;
pub use labpool_link::embedded;
pub mod homes;
pub use labpool_host::identity;
pub use labpool_link::http1;
#[cfg(test)]
mod layering;
pub use labpool_host::member_file;
pub use labpool_link::link_auth;
pub mod memory;
pub use labpool_link::metrics_http;
pub mod progress;
pub mod render;
pub use labpool_host::retry;
pub use labpool_settings::schedule;
pub mod session;
pub use labpool_agent::shim;
pub use labpool_settings as settings;
pub mod slurm_commands;
pub use labpool_controller::slurm_gate;
pub use labpool_controller::snapshot_copies;
pub use labpool_link::socket;
pub use labpool_link::transport;
pub use labpool_link::webhook;
pub use labpool_web as web;
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
