//! A throwaway pool for end-to-end tests: `labpool init` in a temporary directory, a real
//! `labpool serve`, and the real CLI. Everything it started is killed when it is dropped.

use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_labpool"))
}

/// True when running as root. When not root: panics if `LABPOOL_TEST_STRICT=1` (CI sets
/// it, so a root-only test can never pass by skipping there), else says loudly that it skips.
pub fn have_root(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    if strict() {
        panic!("{test} needs root, and LABPOOL_TEST_STRICT=1 says this run must not skip it");
    }
    eprintln!("SKIPPED {test}: needs root (run `scripts/test` as root to include it)");
    false
}

/// True when nothing may be skipped: `scripts/test` (and so CI) sets `LABPOOL_TEST_STRICT=1`.
pub use labpool_testkit::strict;

/// True when `tool` runs. When it does not: panics under [`strict`], else skips loudly.
pub fn have_tool(test: &str, tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        if strict() {
            panic!("{test} needs {tool}, and LABPOOL_TEST_STRICT=1 says this run must not skip it");
        }
        eprintln!("SKIPPED {test}: {tool} is not installed");
    }
    found
}

pub use labpool_testkit::users::{ensure_user, ensure_user_in};
pub use labpool_testkit::wait::wait_until;

/// Whether process `pid` still runs: it exists and is not a zombie (a killed child of init may
/// linger as one for a moment).
pub fn runs(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| !st.contains(") Z "))
}

/// A config `labpool init` wrote, made quick for tests: a 1 s kill grace, 32 cores, and job
/// ports of this test process's own (tests run side by side on one host's network).
pub fn for_tests(text: &str) -> String {
    let base = labpool_testkit::ports::block();
    let ports = format!("ports = \"{base}-{}\"", base + 1_999);
    // Many pools run side by side: each serves its metrics on a port of its own.
    text.replace("kill_grace = \"30s\"", "kill_grace = \"1s\"")
        .replace("listen = \"127.0.0.1:9400\"", "listen = \"127.0.0.1:0\"")
        .replace("listen = \"127.0.0.1:9401\"", "listen = \"127.0.0.1:0\"")
        .replace("listen = \"127.0.0.1:9402\"", "listen = \"127.0.0.1:0\"")
        .replace("# ports = \"20000-29999\"", &ports)
        .lines()
        .map(|l| {
            if l.starts_with("cpus = ") {
                "cpus = 32".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The number a log line gives a field, ` key=N` (tracing writes fields so), when it has it.
pub fn log_number(line: &str, key: &str) -> Option<u64> {
    line.split(&format!(" {key}="))
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A pool under test.
pub struct Pool {
    /// The pool's directory (config, state, socket, log), world-traversable.
    pub dir: PathBuf,
    _tmp: tempfile::TempDir,
    /// The config file.
    pub config: PathBuf,
    /// A world-writable directory where jobs run by default.
    pub work: PathBuf,
    controller: Option<Child>,
    /// The labpool binary the pool uses (a world-executable copy when `for_users`).
    pub bin: PathBuf,
    /// Extra environment for `serve` and the CLI (test hooks).
    pub env: Vec<(String, String)>,
}

impl Pool {
    /// A pool with `gpus` virtual GPUs ("4:rtx4090"), 32 cores, a 1 s kill grace; not started.
    pub fn new(gpus: &str) -> Pool {
        Pool::build(Some(gpus), &[])
    }

    /// Like [`Pool::new`], with extra `labpool init` arguments and no virtual GPUs when `gpus` is None.
    pub fn build(gpus: Option<&str>, extra_env: &[(&str, &str)]) -> Pool {
        let tmp = tempfile::Builder::new()
            .prefix("lp-")
            .tempdir_in("/tmp")
            .unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut init = Command::new(bin());
        init.args(["init", "--dir"])
            .arg(&dir)
            .arg("--home-root")
            .arg(dir.join("shared/home"))
            .envs(extra_env.iter().copied());
        if let Some(g) = gpus {
            init.args(["--virtual-gpus", g]);
        }
        let out = init.output().unwrap();
        assert!(
            out.status.success(),
            "init failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let config = dir.join("labpool.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, for_tests(&text)).unwrap();
        let work = dir.join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Pool {
            dir,
            _tmp: tmp,
            config,
            work,
            controller: None,
            bin: bin(),
            env: Vec::new(),
        }
    }

    /// Copies the binary into the pool so that other users can run it (the build directory may
    /// sit under a home that only root can enter).
    pub fn for_users(mut self) -> Pool {
        let copy = self.dir.join("labpool");
        std::fs::copy(bin(), &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        self.bin = copy;
        self
    }

    /// Rewrites the config text.
    pub fn edit_config(&self, f: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        std::fs::write(&self.config, f(text)).unwrap();
    }

    /// Starts `labpool serve` and waits until it answers.
    pub fn start(&mut self) {
        self.start_as(None);
    }

    /// Starts `labpool serve`, as `uid:gid` when given.
    pub fn start_as(&mut self, ids: Option<(u32, u32)>) {
        use std::os::unix::process::CommandExt;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("serve.out"))
            .unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve")
            .env("LABPOOL_CONFIG", &self.config)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some((uid, gid)) = ids {
            cmd.uid(uid).gid(gid);
        }
        self.controller = Some(cmd.spawn().unwrap());
        let t0 = Instant::now();
        loop {
            let out = self.cli(&["queue"]);
            if out.status.success() {
                return;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                panic!(
                    "controller did not come up: {}\n{}",
                    String::from_utf8_lossy(&out.stderr),
                    self.serve_log()
                );
            }
            if let Some(Ok(Some(status))) = self.controller.as_mut().map(|c| c.try_wait()) {
                panic!("controller exited with {status}:\n{}", self.serve_log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The controller's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.controller.as_ref().map(Child::id)
    }

    /// What `labpool serve` printed.
    pub fn serve_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.out")).unwrap_or_default()
    }

    /// Kills the controller with SIGKILL, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.controller.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Stops the controller with SIGTERM and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.controller.take() {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
            c.wait().unwrap();
        }
    }

    /// A CLI command for this pool, run in the work directory.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .env("LABPOOL_CONFIG", &self.config)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&self.work);
        cmd
    }

    /// One of Slurm's commands (`sinfo`, `scontrol`, `sbatch`, …) as `install-slurm-commands`
    /// links it, with this pool's config; its standard output, the command having succeeded.
    pub fn slurm(&self, name: &str, args: &[&str]) -> String {
        self.slurm_out(name, args, true).0
    }

    /// [`Pool::slurm`], the command having succeeded when `ok`: (stdout, stderr).
    pub fn slurm_out(&self, name: &str, args: &[&str], ok: bool) -> (String, String) {
        let bin = self.dir.join("slurm-bin");
        if !bin.join(name).exists() {
            self.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
        }
        let out = Command::new(bin.join(name))
            .args(args)
            .env("LABPOOL_CONFIG", &self.config)
            .current_dir(&self.work)
            .output()
            .unwrap();
        assert_eq!(out.status.success(), ok, "{name} {args:?}: {out:?}");
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    /// Runs the CLI.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs the CLI as another user, with that user's groups (through `setpriv`, as the
    /// controller must see real supplementary groups for the admin group to count).
    pub fn cli_as(&self, uid: u32, gid: u32, args: &[&str]) -> Output {
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .unwrap()
            .unwrap();
        let mut cmd = Command::new("setpriv");
        cmd.args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--init-groups".to_string(),
        ])
        .arg(&self.bin)
        .args(args)
        .env("LABPOOL_CONFIG", &self.config)
        .env("USER", &user.name)
        .current_dir(&self.work);
        cmd.output().unwrap()
    }

    /// Runs the CLI and returns its standard output; panics with its stderr on failure.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "labpool {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Submits with `--parsable`; returns the job id.
    pub fn submit(&self, args: &[&str]) -> u64 {
        let mut all = vec!["submit", "--parsable"];
        all.extend_from_slice(args);
        self.ok(&all).trim().parse().unwrap()
    }

    /// The jobs RUNNING now.
    pub fn running(&self) -> Vec<Value> {
        self.queue()
            .into_iter()
            .filter(|j| j["state"] == "RUNNING")
            .collect()
    }

    /// `labpool show ID --json`.
    pub fn job(&self, id: u64) -> Value {
        serde_json::from_str(&self.ok(&["show", &id.to_string(), "--json"])).unwrap()
    }

    /// Waits until job `id` is finished; returns it.
    pub fn wait_done(&self, id: u64, timeout: Duration) -> Value {
        self.wait_for(id, timeout, |j| {
            !matches!(j["state"].as_str(), Some("PENDING" | "RUNNING" | "STAGING"))
        })
    }

    /// Waits until `pred` holds for job `id`.
    pub fn wait_for(&self, id: u64, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        wait_until(
            timeout,
            || {
                last = self.job(id);
                pred(&last)
            },
            || {
                format!(
                    "job {id} did not reach the expected state in {timeout:?}: {:#}\n{}",
                    self.job(id),
                    self.serve_log()
                )
            },
        );
        last
    }

    /// `labpool queue --json`.
    pub fn queue(&self) -> Vec<Value> {
        serde_json::from_str(&self.ok(&["queue", "--json"])).unwrap()
    }

    /// `labpool history --json`.
    pub fn history(&self) -> Vec<Value> {
        serde_json::from_str(&self.ok(&["history", "--json"])).unwrap()
    }

    /// Writes an executable script into the work directory.
    pub fn script(&self, name: &str, text: &str) -> PathBuf {
        let p = self.work.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Kills every job process and shim recorded in the spool.
    fn kill_jobs(&self) {
        let jobs = self.dir.join("state/spool/jobs");
        for entry in std::fs::read_dir(jobs).into_iter().flatten().flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path().join("started.json")) else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            for (key, group) in [("pgid", true), ("shim_pid", false)] {
                if let Some(pid) = v[key].as_i64() {
                    let pid = nix::unistd::Pid::from_raw(pid as i32);
                    let _ = if group {
                        nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL)
                    } else {
                        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL)
                    };
                }
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.kill9();
        self.kill_jobs();
        kill_shims_under(&self.dir);
    }
}

/// Kills every job shim whose job directory lies under `dir` (the controller's and its agents'
/// spools), and the shim's own process group: a shim lives on after its controller or agent is
/// killed, by design, and one that started just before has no `started.json` to find it by.
pub fn kill_shims_under(dir: &Path) {
    for pid in shims_under(dir) {
        let pid = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// The pids of the job shims (`labpool shim DIR`) whose job directory lies under `dir`.
pub fn shims_under(dir: &Path) -> Vec<i32> {
    processes()
        .filter(|(_, proc_dir)| {
            let Ok(cmdline) = std::fs::read(proc_dir.join("cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let under = args
                .get(2)
                .is_some_and(|a| Path::new(&*String::from_utf8_lossy(a)).starts_with(dir));
            args.get(1) == Some(&&b"shim"[..]) && under
        })
        .map(|(pid, _)| pid as i32)
        .collect()
}

/// Every process now: its pid and its `/proc/PID` directory.
fn processes() -> impl Iterator<Item = (u32, PathBuf)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_string_lossy().parse().ok()?, e.path())))
}

/// Reads a file the job wrote, waiting a little for it to appear.
pub fn read_output(path: &Path) -> String {
    for _ in 0..100 {
        if let Ok(s) = std::fs::read_to_string(path) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

/// The first line a job writes to `path`, once it is whole: the shell creates the file before
/// it writes to it, so a file that exists may still be empty.
pub fn read_line(path: &Path) -> String {
    for _ in 0..250 {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Some((line, _)) = s.split_once('\n')
        {
            return line.to_string();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never got a whole line", path.display());
}

/// A command's standard output; panics with its stderr when it failed.
pub fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "command failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Runs the CLI, which must fail; returns (exit code, stderr).
pub fn fails(pool: &Pool, args: &[&str]) -> (i32, String) {
    let out = pool.cli(args);
    assert!(
        !out.status.success(),
        "labpool {args:?} should fail but printed {}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Runs the CLI, which must fail; returns its stderr.
pub fn fails_stderr(pool: &Pool, args: &[&str]) -> String {
    fails(pool, args).1
}

/// Asserts that `text` contains every one of `parts`.
pub fn has(text: &str, parts: &[&str]) {
    for p in parts {
        assert!(text.contains(p), "expected {p:?} in:\n{text}");
    }
}

/// A value's string field, or "".
pub fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// Deterministic bytes, so that files differ from each other and from zeros.
pub use labpool_testkit::bytes;

/// `POST path` with a JSON body straight to the controller's socket, as any client could.
pub fn post_raw(socket: &Path, path: &str, body: &Value) -> (u16, Value) {
    api_raw(socket, "POST", path, &serde_json::to_vec(body).unwrap())
}

/// `GET path` straight to the controller's socket.
pub fn get_raw(socket: &Path, path: &str) -> (u16, Value) {
    api_raw(socket, "GET", path, b"")
}

fn api_raw(socket: &Path, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: labpool\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status: u16 = text.split(' ').nth(1).unwrap().parse().unwrap();
    let payload = text.split("\r\n\r\n").nth(1).unwrap_or("");
    let payload = payload.lines().find(|l| l.starts_with('{')).unwrap_or("{}");
    (status, serde_json::from_str(payload).unwrap())
}

/// A webhook receiver on a loopback port: each request's body arrives on the channel.
pub fn webhook() -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut r = std::io::BufReader::new(s.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                std::io::BufRead::read_line(&mut r, &mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut body = vec![0; len];
            std::io::Read::read_exact(&mut r, &mut body).unwrap();
            std::io::Write::write_all(&mut s, b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
            let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
        }
    });
    (url, rx)
}

/// An RFC 3339 time from the API as labpool writes moments for people: local,
/// `YYYY-MM-DD HH:MM:SS`.
pub fn local_moment(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// The pids whose parent is `pid`, from `/proc/*/stat`.
pub fn children_of(pid: u32) -> Vec<u32> {
    processes()
        .filter(|(_, proc_dir)| {
            let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
            // `PID (COMM) STATE PPID …`: COMM may hold spaces and parentheses.
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.split(' ').nth(1))
                .and_then(|p| p.parse::<u32>().ok())
                == Some(pid)
        })
        .map(|(child, _)| child)
        .collect()
}
