//! labpool processes for the cluster benchmark: `labpool init` and its config edits, a free
//! loopback port, and a `serve` or `agent` process stopped with TERM when dropped.

use crate::common::run;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_labpool"))
}

/// A free TCP port on loopback (bound and released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `labpool init ARGS`; panics with what it printed when it fails.
pub fn init(args: &[&str]) {
    run(Command::new(bin()).arg("init").args(args));
}

/// `labpool init` of agent `name` joining `join` with the pool's key `dir/cluster.key`, in
/// `dir/name`, listening on a free loopback port; its config file.
pub fn init_agent(dir: &Path, join: &str, name: &str, gpus: &str) -> PathBuf {
    let node_dir = dir.join(name);
    init(&[
        "--dir",
        node_dir.to_str().unwrap(),
        "--join",
        join,
        "--key",
        dir.join("cluster.key").to_str().unwrap(),
        "--name",
        name,
        "--virtual-gpus",
        gpus,
        "--listen",
        "127.0.0.1:0",
    ]);
    node_dir.join("labpool.toml")
}

/// Rewrites a config file.
pub fn edit(config: &Path, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(config).unwrap();
    std::fs::write(config, f(text)).unwrap();
}

/// Every `cpus = N` line set to 32: jobs ask for one core each, and this machine has 2.
pub fn many_cpus(text: String) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("cpus = ") {
                "cpus = 32"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// A labpool process (`serve` or `agent`), its output in `log`; stopped with TERM on drop.
pub struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `labpool WHAT` on `config`, its output in `log`.
    pub fn start(what: &str, config: &Path, log: PathBuf) -> Daemon {
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin())
            .arg(what)
            .env("LABPOOL_CONFIG", config)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Daemon { child, log }
    }

    /// What it printed so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
