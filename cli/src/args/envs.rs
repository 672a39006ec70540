//! `labpool env`: software environments.

use clap::Subcommand;
use std::path::PathBuf;

// `labpool env ...`.
#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// Lock a spec and build it (or reuse the build of the same lock), under NAME
    Create {
        /// The name jobs use with --env (a name you used before moves to the new build)
        name: String,
        /// requirements.txt, pyproject.toml, environment.yml, a .sif or SquashFS image, or a
        /// file of `module load` lines
        #[arg(long, short = 'f', value_name = "SPEC")]
        file: PathBuf,
        /// venv, conda, container or modules [default: from the file]
        #[arg(long, value_name = "KIND")]
        kind: Option<String>,
        /// Publish it for every member (admins)
        #[arg(long)]
        shared: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Your environments and the shared ones
    List {
        /// Every user's (admins)
        #[arg(long)]
        all: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// One environment: its id, lock, size, where it lives and its build log
    Show {
        /// Name (yours first, then shared), or id
        name: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Remove a name; the build goes too when nothing else uses it
    Rm {
        /// Name
        name: String,
        /// The shared name (admins)
        #[arg(long)]
        shared: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Build a locked environment at its path (started by the controller as the user)
    #[command(hide = true)]
    BuildLocked {
        /// The lock, as JSON.
        lock: PathBuf,
        /// Where to build it.
        dest: PathBuf,
    },
}
