//! `labpool completions SHELL`: the shell completion script, generated from the CLI's own
//! definitions (as the man pages are), so it never disagrees with `--help`. The Debian package
//! installs the bash, zsh and fish scripts; anyone else can `source <(labpool completions bash)`.

use crate::args::Cli;
use clap::CommandFactory;

/// Writes the script for `shell` to standard output.
pub fn print(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut cli = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "labpool", &mut script);
    crate::out!("{}", String::from_utf8_lossy(&script).trim_end());
    Ok(())
}
