//! A "machine" for the package test: a mount namespace in which the packaged layout's paths,
//! `/etc/labpool` and `/var/lib/labpool`, are directories of the test's own (its disk). The
//! package itself is installed on this host once (`dpkg`); each machine has its own config and
//! state, so a controller and an agent can both use the packaged paths, and no other test ever
//! finds this config at the default path.

use crate::pool::wait_until;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// The packaged layout's directories, in the order a machine binds them.
pub const PACKAGED_DIRS: [&str; 2] = ["/etc/labpool", "/var/lib/labpool"];

/// One machine: a process holding the mount namespace, and what runs in it.
pub struct Machine {
    /// The directory standing for the machine's disk: `etc` and `var` bound on the
    /// packaged paths.
    pub disk: PathBuf,
    holder: Child,
    daemons: Vec<Child>,
}

impl Machine {
    /// A machine whose disk is `disk` (created). The packaged paths must exist on the host
    /// (the package's postinst makes them).
    pub fn boot(disk: &Path) -> Machine {
        let (etc, var) = (disk.join("etc"), disk.join("var"));
        for d in [&etc, &var] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut holder = Command::new("unshare")
            .args(["-m", "--propagation", "private", "--", "sh", "-c"])
            .arg(format!(
                "mount --bind \"$0\" {} && mount --bind \"$1\" {} && echo ready && exec sleep 3600",
                PACKAGED_DIRS[0], PACKAGED_DIRS[1]
            ))
            .arg(&etc)
            .arg(&var)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "the machine's mounts failed");
        Machine {
            disk: disk.to_path_buf(),
            holder,
            daemons: Vec::new(),
        }
    }

    /// `argv` run inside the machine, as root.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-m", "-t", &self.holder.id().to_string(), "--"])
            .args(argv)
            .env_remove("LABPOOL_CONFIG");
        cmd
    }

    /// `labpool ARGS` in the machine, with no config named: the packaged default is used.
    pub fn labpool(&self, args: &[&str]) -> Output {
        let mut argv = vec!["/usr/bin/labpool"];
        argv.extend_from_slice(args);
        self.command(&argv).output().unwrap()
    }

    /// [`Machine::labpool`] that must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.labpool(args);
        assert!(
            out.status.success(),
            "labpool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `unit`'s `ExecStart` line, as systemd would, with its output in DISK/NAME.out.
    pub fn start_unit(&mut self, unit: &Path) {
        let text = std::fs::read_to_string(unit).unwrap();
        let exec = text
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap_or_else(|| panic!("no ExecStart in {}", unit.display()));
        let argv: Vec<&str> = exec.split_whitespace().collect();
        let name = unit.file_stem().unwrap().to_string_lossy().into_owned();
        let log = std::fs::File::create(self.disk.join(format!("{name}.out"))).unwrap();
        let child = self
            .command(&argv)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.daemons.push(child);
    }

    /// What the daemons printed.
    pub fn daemon_output(&self) -> String {
        let mut all = String::new();
        for unit in ["labpool", "labpool-agent"] {
            if let Ok(t) = std::fs::read_to_string(self.disk.join(format!("{unit}.out"))) {
                all.push_str(&format!("--- {unit}\n{t}"));
            }
        }
        all
    }

    /// Waits until `labpool ARGS` succeeds in the machine (a daemon answers).
    pub fn wait_ok(&self, args: &[&str], timeout: Duration) {
        wait_until(
            timeout,
            || self.labpool(args).status.success(),
            || format!("labpool {args:?} never answered\n{}", self.daemon_output()),
        );
    }

    /// Stops the daemons (TERM, then waits) and leaves the namespace.
    pub fn shut_down(&mut self) {
        for mut d in self.daemons.drain(..) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(d.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = d.wait();
        }
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
        }
        self.shut_down();
    }
}
