//! One module per command; each takes its clap arguments and the resolved config.

pub mod alerts;
pub mod completions;
pub mod datasets;
pub mod demo;
pub mod doctor;
pub mod envs;
pub mod forward;
pub mod init;
pub mod init_agent;
pub mod init_slurm;
pub mod init_systemd;
pub mod jobs;
pub mod logs;
pub mod man_pages;
pub mod models;
pub mod nodes;
pub mod notebook;
pub mod policy;
pub mod quotas;
pub mod reports;
pub mod reservations;
pub mod run;
pub mod serve;
pub mod sim;
pub mod sim_history;
pub mod slice_exec;
pub mod snapshots;
pub mod state;
pub mod submit;
pub mod submit_wait;
pub mod test_only;
pub mod upgrade_check;
pub mod web;

use crate::args::{Cli, Command, PartitionCommand};
use crate::settings::Config;

/// Runs the command the user typed.
pub fn dispatch(cli: Cli, slurm: &dyn crate::SlurmNames) -> anyhow::Result<()> {
    // `--show-settings` (hidden): the resolved config, whatever the command, and nothing else.
    if cli.show_settings {
        let config = Config::locate(cli.config.as_deref())?;
        crate::out!("{}", config.settings_json()?);
        return Ok(());
    }
    match &cli.command {
        Command::Init(args) => return init::run(args),
        Command::Sim(args) if args.from_history => {
            return sim_history::run(args, cli.config.as_deref());
        }
        Command::Sim(args) => return sim::run(args, cli.config.as_deref()),
        Command::Shim { dir } => return crate::shim::run(dir),
        Command::InstallSlurmCommands { dir } => {
            return slurm.install(dir);
        }
        Command::ManPages { dir } => return man_pages::run(dir, slurm),
        Command::Completions { shell } => return completions::print(*shell),
        Command::Logs(args) => return logs::run(args, &Config::locate(cli.config.as_deref())?),
        Command::SessionHost {
            socket,
            idle,
            command,
        } => {
            // The idle rule's reports go to the controller this node's config names.
            let controller = Config::locate(cli.config.as_deref())
                .ok()
                .map(|c| c.controller.socket);
            std::process::exit(crate::session::host::run(
                socket, *idle, command, controller,
            ));
        }
        Command::SliceExec { mib, command } => return slice_exec::run(*mib, command),
        Command::NotebookHost { idle } => {
            let controller = Config::locate(cli.config.as_deref())
                .ok()
                .map(|c| c.controller.socket);
            std::process::exit(crate::session::notebook_host::run(*idle, controller));
        }
        Command::Env {
            command: crate::args::EnvCommand::BuildLocked { lock, dest },
        } => return envs::build_locked(lock, dest),
        Command::Model {
            command:
                crate::args::ModelCommand::Export {
                    dir,
                    repo,
                    revision,
                },
        } => return models::export(dir, repo, revision),
        _ => {}
    }
    let multi_thread = matches!(
        cli.command,
        Command::Serve | Command::Agent | Command::Demo(_)
    );
    let runtime = if multi_thread {
        // A daemon frees as much as it allocates over a day: give it back to the system.
        crate::memory::limit_arenas();
        crate::memory::trim_every(std::time::Duration::from_secs(10));
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    runtime.block_on(async {
        if let Command::Demo(args) = &cli.command {
            return demo::run(args).await;
        }
        if let Command::State {
            command:
                crate::args::StateCommand::Restore {
                    from,
                    from_repo,
                    at,
                    force,
                },
        } = &cli.command
        {
            let source = match (from, from_repo) {
                (Some(dir), _) => state::Source::Dir(dir),
                (None, Some(repo)) => state::Source::Repo(repo, at.as_deref()),
                (None, None) => unreachable!("clap requires one"),
            };
            return state::restore_command(source, *force, cli.config.as_deref()).await;
        }
        // A submit reads only the socket of the config, as `sbatch` does: a lab's loop runs
        // one per job, and the controller checked the whole file when it started.
        if let Command::Submit(args) = &cli.command {
            let socket = Config::locate_socket(cli.config.as_deref())?;
            let client = crate::client::Client::new(&socket);
            return submit::submit_as(args, client, submit::Style::Labpool).await;
        }
        let config = Config::locate(cli.config.as_deref())?;
        match &cli.command {
            Command::Serve => serve::run(config).await,
            Command::Agent => serve::run_agent(config).await,
            Command::Submit(_) => unreachable!("a submit was sent above"),
            Command::Queue(args) => jobs::queue(args, &config).await,
            Command::Show(args) => jobs::show(args, &config).await,
            Command::Cancel(args) => jobs::cancel(args, &config).await,
            Command::Update(args) => jobs::update(args, &config).await,
            Command::Run(args) => {
                let code = run::run(args, &config).await?;
                std::process::exit(code);
            }
            Command::Alloc(args) => {
                // salloc's shell: a session inside the allocation, where srun runs steps.
                let mut args = args.clone();
                args.pty = true;
                let code = run::run(&args, &config).await?;
                std::process::exit(code);
            }
            Command::Notebook(args) => notebook::notebook(args, &config).await,
            Command::Forward { job, port, local } => {
                forward::forward(job, *port, *local, &config).await
            }
            Command::Attach { job } => {
                let code = run::attach(job, &config).await?;
                std::process::exit(code);
            }
            Command::Requeue(args) => jobs::requeue(args, &config).await,
            Command::Hold(args) => jobs::hold(args, true, &config).await,
            Command::Release(args) => jobs::hold(args, false, &config).await,
            Command::History(args) => jobs::history(args, &config).await,
            Command::Nodes(a) => nodes::nodes(a.json, &config).await,
            Command::Alerts(a) => alerts::alerts(a.json, a.all, &config).await,
            Command::Report(a) => {
                reports::report(
                    a.month.as_deref(),
                    a.from.as_deref(),
                    a.to.as_deref(),
                    a.format,
                    a.out.as_deref(),
                    a.what_if.as_deref(),
                    &config,
                )
                .await
            }
            Command::Web(a) => web::login_url(a.next.clone(), a.json, &config).await,
            Command::Usage(a) => {
                reports::usage(a.user.as_deref(), a.month.as_deref(), a.json, &config).await
            }
            Command::UpgradeCheck { json } => {
                if !upgrade_check::run(*json, &config).await? {
                    std::process::exit(1);
                }
                Ok(())
            }
            Command::Doctor(a) => {
                let healthy =
                    doctor::doctor(a.json, Some(a.waiting_hours), Some(a.running_days), &config)
                        .await?;
                if !healthy {
                    std::process::exit(1);
                }
                Ok(())
            }
            Command::Node { command } => nodes::node(command, &config).await,
            Command::Why(args) => policy::why(args, &config).await,
            Command::State { command } => state::run(command, &config).await,
            Command::Account { command } => policy::account(command, &config).await,
            Command::Reservation { command } => reservations::reservation(command, &config).await,
            Command::Qos { command } => policy::qos(command, &config).await,
            Command::Credits(args) => policy::credits(args, &config).await,
            Command::Partition {
                command: PartitionCommand::List(a),
            } => nodes::partitions(a.json, &config).await,
            Command::Dataset { command } => datasets::dataset(command, &config).await,
            Command::Cache { command } => datasets::cache(command, &config).await,
            Command::Snapshot { command } => snapshots::run(command, &config).await,
            Command::Quota(args) => quotas::quota(args, &config).await,
            Command::Purge { command } => quotas::purge(command, &config).await,
            Command::Env { command } => envs::run(command, &config).await,
            Command::Model { command } => models::run(command, &config).await,
            Command::Init(_)
            | Command::Shim { .. }
            | Command::Demo(_)
            | Command::Sim(_)
            | Command::InstallSlurmCommands { .. }
            | Command::ManPages { .. }
            | Command::Completions { .. }
            | Command::Logs(_)
            | Command::SessionHost { .. }
            | Command::NotebookHost { .. }
            | Command::SliceExec { .. } => {
                unreachable!("handled above")
            }
        }
    })
}
