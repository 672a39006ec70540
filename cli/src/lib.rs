//! labpool's command line: the arguments (clap), a command for each, and interactive sessions.
//! Slurm's command names build on it (`labpool-slurm-commands`), and the `labpool` binary
//! wires both. It reaches the layers below it (see the binary's `layering.rs`): the controller
//! ([`labpool_controller`], with the Slurm gate), the node agent and shim ([`labpool_agent`]),
//! the web dashboard ([`labpool_web`]), the links between them ([`labpool_link`]), this machine
//! ([`labpool_host`]), the config ([`labpool_settings`]) and the wire types ([`labpool_api`]).

pub use labpool_agent as agent;
pub use labpool_api as api;
pub use labpool_host::atomic_file;
pub mod args;
pub mod begin;
pub use labpool_host::clock;
pub use labpool_link::client;
pub mod commands;
pub use labpool_controller as controller;
pub use labpool_host::discovery;
pub use labpool_host::env_vars;
pub use labpool_link::embedded;
pub mod homes;
pub use labpool_host::identity;
pub use labpool_host::member_file;
pub use labpool_link::http1;
pub use labpool_link::link_auth;
pub mod logging;
pub mod memory;
pub use labpool_link::metrics_http;
pub mod progress;
pub mod render;
pub use labpool_host::retry;
pub use labpool_settings::schedule;
pub mod session;
pub use labpool_agent::shim;
pub use labpool_controller::slurm_gate;
pub use labpool_controller::snapshot_copies;
pub use labpool_link::socket;
pub use labpool_link::transport;
pub use labpool_link::tunnel;
pub use labpool_link::webhook;
pub use labpool_settings as settings;
pub use labpool_web as web;
pub mod when;

use clap::Parser;
use std::path::Path;
use std::process::ExitCode;

/// What the CLI asks of Slurm's command names, which build on it (`labpool-slurm-commands`):
/// the binary hands them in, so that this crate never depends on them.
pub trait SlurmNames {
    /// Links Slurm's command names (`sbatch`, `squeue`, …) to this binary in `dir`.
    fn install(&self, dir: &Path) -> anyhow::Result<()>;
    /// Their man pages for `version`: (file name, roff text).
    fn man_pages(&self, version: &str) -> Vec<(String, String)>;
}

/// Parses the command line, runs it, and maps the result to an exit code: 0 on success, 1 on
/// an error (printed with its hint), 2 on a usage error.
pub fn main(slurm: &dyn SlurmNames) -> ExitCode {
    let cli = args::Cli::parse();
    match commands::dispatch(cli, slurm) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
