//! Slurm's command names, for the habits people and scripts already have: the labpool binary
//! called as `sbatch`, `squeue`, `scancel`, `sinfo`, `sacct`, `scontrol` or `srun` behaves as that
//! command, for the options people use. Inside a job, the agent puts `srun` and `scontrol`
//! first on the job's `PATH`; `labpool install-slurm-commands DIR` makes all the links for a
//! login node.
//!
//! It builds on the CLI (`labpool-cli`: its submit path, sessions and client), and gives the
//! CLI back what it asks of the names ([`Names`]) through the binary, which wires the two.

// The CLI's modules under the names this crate's code has always used.
use labpool_cli::args as cli;
use labpool_cli::{
    agent, api, begin, client, clock, commands, controller, env_vars, link_auth, out, session,
    settings,
};

pub mod args;
pub mod compat;
pub mod format;
pub mod sacct;
pub mod sattach;
pub mod scancel;
pub mod scontrol;
pub mod scontrol_partition;
pub mod sinfo;
pub mod squeue;
pub mod srun;
pub mod srun_alloc;
pub mod step_host;
pub mod step_output;
pub mod step_plan;
pub mod step_remote;

use crate::client::Client;
use crate::settings::Config;
use clap::Parser;
use std::process::ExitCode;

/// The names `install-slurm-commands` links.
pub const COMMANDS: [&str; 9] = [
    "sbatch", "squeue", "scancel", "sinfo", "sacct", "scontrol", "srun", "salloc", "sattach",
];

/// How long an ended job stays in `squeue -t all` (and the value `scontrol show config` gives),
/// seconds: Slurm's default `MinJobAge`.
pub const MIN_JOB_AGE_S: i64 = 300;

pub use crate::agent::jobdir::JOB_COMMANDS;

/// Runs the personality the program was called by, if it is one.
pub fn personality(argv0: &str, args: &[String]) -> Option<ExitCode> {
    let name = std::path::Path::new(argv0).file_name()?.to_str()?;
    if !COMMANDS.contains(&name) && name != crate::agent::gang::STEP_HOST {
        return None;
    }
    // srun's words after its command are the command's; its parser stops there itself.
    if name != "srun"
        && let Some(text) = compat::version_or_usage(name, args)
    {
        crate::out!("{text}");
        return Some(ExitCode::SUCCESS);
    }
    let extras = match name {
        "squeue" => compat::tables::SQUEUE,
        "sinfo" => compat::tables::SINFO,
        "sacct" => compat::tables::SACCT,
        "scancel" => compat::tables::SCANCEL,
        "scontrol" => compat::tables::SCONTROL,
        "salloc" => compat::tables::SALLOC,
        _ => &[],
    };
    // salloc's command keeps its own words (`salloc -N2 srun -K ./app`).
    let alloc = (name == "salloc").then(crate::cli::alloc_command);
    let stripped = compat::strip(args, extras, alloc.as_ref());
    for w in &stripped.warnings {
        eprintln!("{name}: warning: {w}");
    }
    if !stripped.refusals.is_empty() {
        for r in &stripped.refusals {
            eprintln!("{name}: error: {r}");
        }
        return Some(ExitCode::from(1));
    }
    let args = &stripped.args[..];
    let code = match name {
        "srun" => srun::main(args),
        crate::agent::gang::STEP_HOST => step_host::main(),
        "sbatch" => sbatch(args),
        "salloc" => {
            let mut argv = vec!["labpool".to_string(), "alloc".to_string()];
            argv.extend(args.iter().cloned());
            match crate::cli::Cli::try_parse_from(argv) {
                Ok(cli) => match crate::commands::dispatch(cli, &crate::Names) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("salloc: error: {e:#}");
                        ExitCode::from(1)
                    }
                },
                Err(e) => {
                    let _ = e.print();
                    ExitCode::from(1)
                }
            }
        }
        "squeue" => talk(name, |c| async move {
            let a = squeue::SqueueArgs::try_parse_from(args)?;
            squeue::squeue(&c, &a, &whoami()).await
        }),
        "scancel" => talk(name, |c| async move {
            let a = scancel::ScancelArgs::try_parse_from(args)?;
            scancel::scancel(&c, &a).await
        }),
        "sacct" => talk(name, |c| async move {
            let a = sacct::SacctArgs::try_parse_from(args)?;
            sacct::sacct(&c, &a, &whoami()).await
        }),
        "sinfo" => talk(name, |c| async move {
            let a = sinfo::SinfoArgs::try_parse_from(args)?;
            sinfo::sinfo(&c, &a).await
        }),
        "scontrol" => talk(name, |c| async move { scontrol::scontrol(&c, args).await }),
        "sattach" => {
            // The session's exit code is sattach's.
            let code = std::cell::Cell::new(0);
            let code_of = &code;
            let out = talk(name, |c| async move {
                let a = sattach::SattachArgs::try_parse_from(args)?;
                code_of.set(sattach::sattach(&c, &a).await?);
                Ok(String::new())
            });
            if code.get() != 0 {
                ExitCode::from(code.get().clamp(0, 255) as u8)
            } else {
                out
            }
        }
        _ => return None,
    };
    Some(code)
}

/// The caller's user name.
fn whoami() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| nix::unistd::geteuid().to_string(), |u| u.name)
}

/// The controller's socket per the config `$LABPOOL_CONFIG` names, else the default one
/// (Slurm's commands take no `--config`): all they read of it ([`Config::locate_socket`]).
fn socket() -> anyhow::Result<std::path::PathBuf> {
    let named = std::env::var_os(crate::env_vars::LABPOOL_CONFIG).map(std::path::PathBuf::from);
    Ok(Config::locate_socket(named.as_deref())?)
}

/// Runs `f` against the controller of the config in `$LABPOOL_CONFIG` (or the default
/// place), prints what it returns, and maps an error to `NAME: error: ...` and exit code 1.
fn talk<F, Fut>(name: &str, f: F) -> ExitCode
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    let run = || -> anyhow::Result<String> {
        let client = Client::new(&socket()?);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(f(client))
    };
    match run() {
        Ok(out) => {
            if !out.is_empty() {
                crate::out!("{out}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let Some(clap) = e.downcast_ref::<clap::Error>() {
                let _ = clap.print();
                return ExitCode::from(1);
            }
            for line in format!("{e:#}").lines() {
                eprintln!("{name}: error: {line}");
            }
            ExitCode::from(1)
        }
    }
}

/// sbatch's command line: `labpool submit`'s.
#[derive(Parser)]
#[command(name = "sbatch", no_binary_name = true, infer_long_args = true)]
pub struct Sbatch {
    #[command(flatten)]
    args: crate::cli::SubmitArgs,
}

/// `sbatch`: `labpool submit` with sbatch's words.
fn sbatch(args: &[String]) -> ExitCode {
    let parsed = match Sbatch::try_parse_from(args) {
        Ok(p) => p,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(1);
        }
    };
    talk("sbatch", |client| async move {
        crate::commands::submit::submit_as(
            &parsed.args,
            client,
            crate::commands::submit::Style::Sbatch,
        )
        .await?;
        Ok(String::new())
    })
}

/// `labpool install-slurm-commands DIR`: links each of Slurm's command names in `DIR` to this
/// binary. A name already there that is not such a link is left alone, and said.
pub fn install_commands(dir: &std::path::Path) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    std::fs::create_dir_all(dir)?;
    let mut skipped = Vec::new();
    for name in COMMANDS {
        let link = dir.join(name);
        match std::fs::read_link(&link) {
            Ok(target) if target == exe => continue,
            Ok(_) => std::fs::remove_file(&link)?,
            Err(_) if link.exists() => {
                skipped.push(link.display().to_string());
                continue;
            }
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&exe, &link)?;
        crate::out!("{} -> {}", link.display(), exe.display());
    }
    if !skipped.is_empty() {
        anyhow::bail!(
            "left alone, as they are not links: {}\nhint: remove them, or pick another DIR",
            skipped.join(", ")
        );
    }
    Ok(())
}

/// What the CLI asks of the Slurm names: `install-slurm-commands` and their man pages.
pub struct Names;

impl labpool_cli::SlurmNames for Names {
    fn install(&self, dir: &std::path::Path) -> anyhow::Result<()> {
        install_commands(dir)
    }

    fn man_pages(&self, version: &str) -> Vec<(String, String)> {
        compat::man::pages(version)
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn each_command_line_is_well_formed() {
        super::squeue::SqueueArgs::command().debug_assert();
        super::sinfo::SinfoArgs::command().debug_assert();
        super::scancel::ScancelArgs::command().debug_assert();
        super::sacct::SacctArgs::command().debug_assert();
        super::sattach::SattachArgs::command().debug_assert();
    }

    /// `labpool install-slurm-commands --help` names every command it links.
    #[test]
    fn the_install_help_names_every_command_it_links() {
        let mut cli = <crate::cli::Cli as clap::CommandFactory>::command();
        let about = cli
            .find_subcommand_mut("install-slurm-commands")
            .expect("the subcommand exists")
            .render_help()
            .to_string();
        for name in super::COMMANDS {
            assert!(about.contains(name), "{name} missing from:\n{about}");
        }
    }
}
