//! `labpool init`: a new config for this machine, or for a node that joins a controller.

use clap::Args;
use std::path::PathBuf;

// `labpool init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// Directory for the config, state, socket and log [default: the packaged layout: the
    /// config and cluster.key in /etc/labpool, the rest in /var/lib/labpool]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Switch on virtual GPUs, for a machine without an NVIDIA driver (e.g. 4:rtx4090)
    #[arg(long, value_name = "N[:TYPE]")]
    pub virtual_gpus: Option<String>,
    /// Node name [default: the host name]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Put the shared file systems (datasets, home, scratch) here [default: DIR/shared]
    #[arg(long, value_name = "PATH")]
    pub shared_root: Option<PathBuf>,
    /// Where members' home directories are, for the home snapshots and quota [default: found
    /// from the users in /etc/passwd; with --shared-root, SHARED/home]
    #[arg(long, value_name = "PATH")]
    pub home_root: Option<PathBuf>,
    /// Overwrite an existing DIR/labpool.toml
    #[arg(long)]
    pub force: bool,
    /// Write a node agent's config that joins the controller at HOST:PORT (its `listen`)
    #[arg(long, value_name = "HOST:PORT", requires = "key")]
    pub join: Option<String>,
    /// The controller's cluster.key, copied to this node (with --join)
    #[arg(long, value_name = "FILE", requires = "join")]
    pub key: Option<PathBuf>,
    /// Who runs jobs: `slurm` reads the nodes and partitions of the Slurm this machine talks to
    /// (`scontrol`, `$SLURM_CONF` or --slurm-conf) and writes a controller that submits to it
    /// [default: labpool's own agents]
    #[arg(long, value_name = "KIND", value_parser = ["agents", "slurm"], conflicts_with = "join")]
    pub executor: Option<String>,
    /// Slurm's config file, for --executor slurm [default: $SLURM_CONF, or Slurm's own]
    #[arg(long, value_name = "FILE", requires = "executor")]
    pub slurm_conf: Option<PathBuf>,
    /// Where the controller takes agents (without --join), or where this agent takes orders
    /// and peers' requests (with --join) [default: agent 0.0.0.0:7071; controller: none]
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Also write the systemd unit that runs the daemon (labpool.service, or
    /// labpool-agent.service with --join) to /etc/systemd/system, and enable and start it
    #[arg(long)]
    pub systemd: bool,
    /// With --systemd: write the unit here instead, and leave enabling it to you
    #[arg(long, value_name = "DIR", requires = "systemd")]
    pub systemd_dir: Option<PathBuf>,
}
