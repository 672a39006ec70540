//! Slurm's command names, for the habits people and scripts already have: the labpool binary
//! called as `srun` or `scontrol` (through a link the agent puts first on each job's `PATH`)
//! behaves as that command.

pub mod args;
pub mod scontrol;
pub mod srun;

use std::process::ExitCode;

/// Runs the personality the program was called by, if it is one: `srun`, `scontrol`.
pub fn personality(argv0: &str, args: &[String]) -> Option<ExitCode> {
    let name = std::path::Path::new(argv0).file_name()?.to_str()?;
    match name {
        "srun" => Some(srun::main(args)),
        "scontrol" => Some(scontrol::main(args)),
        _ => None,
    }
}

/// The names a job's `PATH` links to labpool.
pub const JOB_COMMANDS: [&str; 2] = ["srun", "scontrol"];
