//! `labpool init --systemd`: the systemd unit that runs the daemon the new config is for
//! (`labpool.service` for a controller, `labpool-agent.service` for a node agent), written to
//! `/etc/systemd/system` (or `--systemd-dir`), and enabled when systemd runs this machine.
//!
//! What the unit decides, and why:
//! - Jobs outlive a stop or restart (every upgrade) in two ways. Each job's shim moves itself out
//!   of the daemon's cgroup into `labpool/shim-JOB.ATTEMPT` at the root of the hierarchies
//!   systemd tracks (`labpool_isolation::leave_service_cgroup`), so the unit's cgroup holds the
//!   daemon alone. And `KillMode=process` ends only the daemon even where a shim could not
//!   move, as Slurm's `slurmd.service` does. The next daemon re-adopts the running jobs.
//! - `After=network-online.target remote-fs.target`: it takes agents over the network and reads
//!   datasets and homes from shared file systems.
//! - `Restart=on-failure`: a crash restarts it; the state on disk is consistent after any end.
//! - `ExecReload` (the controller's): `systemctl reload labpool` sends SIGHUP, and the
//!   controller reads its scheduling policy again without a restart.
//! - Hardening: only `RestrictSUIDSGID`. Every job inherits the service's system-call filters
//!   through its shim (leaving the cgroup does not drop them), so `SystemCallArchitectures`,
//!   `RestrictRealtime` and `LockPersonality` would stop a member's 32-bit tools, real-time
//!   scheduling and `setarch` in jobs; a job making set-user-ID files is refused on purpose. Not
//!   `NoNewPrivileges`, `ProtectSystem` or `ProtectHome`: it starts each job as its member, and
//!   writes its state, the node cache, scratch and the members' homes. Not `ProtectClock`,
//!   `ProtectKernelLogs` or `PrivateDevices`: they bring device rules that would hide the GPUs
//!   from jobs, or a mount namespace of the service's own, which the jobs would inherit. No
//!   `Delegate=`: the daemon makes no cgroups inside its own (the jobs' and shims' are at the
//!   hierarchies' roots, under `labpool/`).

use anyhow::Context;
use std::path::{Path, PathBuf};

/// Which daemon a unit runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// `labpool serve`.
    Controller,
    /// `labpool agent`.
    Agent,
}

impl Daemon {
    /// The unit's file name.
    pub fn unit(self) -> &'static str {
        match self {
            Daemon::Controller => "labpool.service",
            Daemon::Agent => "labpool-agent.service",
        }
    }
}

/// Where units go when `--systemd-dir` does not say.
pub const UNIT_DIR: &str = "/etc/systemd/system";

/// Where the Debian package puts its units (`packaging/deb/`): the binary at `/usr/bin/labpool`
/// and the config at `/etc/labpool/labpool.toml`. `init --systemd` enables those as they are.
pub const PACKAGED_UNIT_DIR: &str = "/lib/systemd/system";

/// The unit's text for `daemon`, running `bin` with `config`.
pub fn unit_text(daemon: Daemon, bin: &Path, config: &Path) -> String {
    let (what, command, man, reload) = match daemon {
        Daemon::Controller => (
            "controller: schedules the lab's GPU jobs",
            "serve",
            "serve",
            "# systemctl reload: the scheduling policy is read again (docs/admin/install.md).\nExecReload=/bin/kill -HUP $MAINPID\n",
        ),
        Daemon::Agent => (
            "node agent: runs jobs and stages data on this node",
            "agent",
            "agent",
            "",
        ),
    };
    format!(
        r#"# labpool's unit, as `labpool init --systemd` writes it and the Debian package ships it;
# what each line decides, and why, is in docs/admin/install.md. Edit with `systemctl edit {unit}`.
[Unit]
Description=labpool {what}
Documentation=man:labpool-{man}(1)
After=network-online.target remote-fs.target
Wants=network-online.target

[Service]
Type=exec
ExecStart={bin} {command} --config {config}
{reload}# A restart (every upgrade) ends the daemon only: running jobs stay and are re-adopted.
KillMode=process
Restart=on-failure
RestartSec=5s
LimitNOFILE=65536
RestrictSUIDSGID=yes

[Install]
WantedBy=multi-user.target
"#,
        unit = daemon.unit(),
        bin = bin.display(),
        config = config.display(),
    )
}

/// `init --systemd`: the unit for `daemon` running `config`, when the arguments ask for one.
pub fn when_asked(
    args: &crate::args::InitArgs,
    daemon: Daemon,
    config: &Path,
) -> anyhow::Result<()> {
    if args.systemd {
        install(daemon, config, args.systemd_dir.as_deref())?;
    }
    Ok(())
}

/// Writes the unit for `daemon` into `dir` (default [`UNIT_DIR`]), and enables and starts it
/// when systemd runs this machine; otherwise says how.
pub fn install(daemon: Daemon, config: &Path, dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let bin = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot tell where this labpool binary is, for the unit's ExecStart")?;
    let config = std::path::absolute(config).context("bad config path")?;
    let text = unit_text(daemon, &bin, &config);
    let dir = dir.unwrap_or(Path::new(UNIT_DIR));
    let packaged = Path::new(PACKAGED_UNIT_DIR).join(daemon.unit());
    let path = if dir == Path::new(UNIT_DIR)
        && std::fs::read_to_string(&packaged).is_ok_and(|t| t == text)
    {
        // The package's unit runs this binary with this config already: enable it as it is.
        // One that an earlier `init --systemd` wrote in /etc would shadow it: it goes; one an
        // admin wrote stays, and is named.
        let shadow = dir.join(daemon.unit());
        match std::fs::read_to_string(&shadow) {
            Ok(t) if t.contains("labpool init --systemd") => {
                std::fs::remove_file(&shadow)
                    .with_context(|| format!("cannot remove {}", shadow.display()))?;
                crate::out!(
                    "  removed {}, which shadowed the package's unit",
                    shadow.display()
                );
            }
            Ok(_) => crate::out!(
                "  note: {} shadows the package's unit; remove it to use the package's",
                shadow.display()
            ),
            Err(_) => {}
        }
        crate::out!("  unit   {} (from the package)", packaged.display());
        packaged
    } else {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(daemon.unit());
        crate::atomic_file::write_atomic(&path, text.as_bytes(), 0o644, true)
            .with_context(|| format!("cannot write {}", path.display()))?;
        crate::out!("  unit   {}", path.display());
        path
    };
    let systemd_runs = Path::new("/run/systemd/system").is_dir();
    if systemd_runs && dir == Path::new(UNIT_DIR) {
        for args in [
            vec!["daemon-reload"],
            vec!["enable", "--now", daemon.unit()],
        ] {
            let status = std::process::Command::new("systemctl")
                .args(&args)
                .status()
                .context("cannot run systemctl")?;
            if !status.success() {
                anyhow::bail!(
                    "systemctl {} failed ({status}); see journalctl -u {}",
                    args.join(" "),
                    daemon.unit()
                );
            }
        }
        crate::out!("  started and enabled: systemctl status {}", daemon.unit());
    } else {
        crate::out!(
            "  start it: systemctl daemon-reload && systemctl enable --now {}",
            daemon.unit()
        );
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The package's units are what `init --systemd` writes for the packaged paths, so that
    /// `init --systemd` on a packaged machine enables them instead of writing its own.
    #[test]
    fn the_packaged_units_are_what_init_writes_for_the_packaged_paths() {
        let bin = Path::new("/usr/bin/labpool");
        let config = Path::new(crate::settings::DEFAULT_CONFIG_PATH);
        for (daemon, packaged) in [
            (
                Daemon::Controller,
                include_str!("../../../packaging/deb/labpool.service"),
            ),
            (
                Daemon::Agent,
                include_str!("../../../packaging/deb/labpool-agent.service"),
            ),
        ] {
            assert_eq!(
                unit_text(daemon, bin, config),
                packaged,
                "packaging/deb/{} differs from what init writes: regenerate it",
                daemon.unit()
            );
        }
    }
}
