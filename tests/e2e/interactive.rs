//! Interactive sessions, driven through a pseudo-terminal as a person would: `labpool run
//! --pty bash` gives a shell inside a job on the interactive partition, with its GPUs; exiting
//! frees them; a resized window reaches the shell; an idle session is stopped with a notice.
//! A killed terminal detaches (`detach.rs`).

use crate::pool::{Pool, s};
use nix::pty::{OpenptyResult, openpty};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

/// A terminal the test types into, with the session client on its other end.
pub struct Terminal {
    master: std::fs::File,
    seen: mpsc::Receiver<Vec<u8>>,
    text: String,
    client: Child,
}

impl Terminal {
    pub fn open(pool: &Pool, args: &[&str]) -> Terminal {
        Terminal::open_with(pool, &pool.bin, args)
    }

    pub fn open_with(pool: &Pool, program: &std::path::Path, args: &[&str]) -> Terminal {
        let OpenptyResult { master, slave } = openpty(None, None).unwrap();
        let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        let client = Command::new(program)
            .args(args)
            .env("LABPOOL_CONFIG", &pool.config)
            .env("SHELL", "/bin/bash")
            .env("PS1", "$ ")
            .current_dir(&pool.work)
            .stdin(io(&slave))
            .stdout(io(&slave))
            .stderr(io(&slave))
            .spawn()
            .unwrap();
        drop(slave);
        let mut reader = std::fs::File::from(master.try_clone().unwrap());
        let (tx, seen) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Terminal {
            master: std::fs::File::from(master),
            seen,
            text: String::new(),
            client,
        }
    }

    /// Gives the terminal a new size and tells the client, as a terminal window does.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        nix::ioctl_write_ptr_bad!(tiocswinsz, nix::libc::TIOCSWINSZ, nix::pty::Winsize);
        let w = nix::pty::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads the struct it is given, on the terminal this test holds.
        unsafe { tiocswinsz(std::os::fd::AsRawFd::as_raw_fd(&self.master), &w) }.unwrap();
        let pid = nix::unistd::Pid::from_raw(self.client.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGWINCH).unwrap();
    }

    /// Kills the client, as a closed laptop or a dropped ssh does.
    pub fn kill_client(&mut self) {
        self.client.kill().unwrap();
        let _ = self.client.wait();
    }

    /// Types `bytes` as they are (control keys included).
    pub fn send(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).unwrap();
    }

    pub fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    /// Waits until the screen shows `what`.
    pub fn expect(&mut self, what: &str) {
        self.expect_times(what, 1);
    }

    /// Waits until the screen has shown `what` `n` times.
    pub fn expect_times(&mut self, what: &str, n: usize) {
        let t0 = Instant::now();
        while self.text.matches(what).count() < n {
            assert!(
                t0.elapsed() < T,
                "no {what:?} ({n} times) on the terminal:\n{}",
                self.text
            );
            if let Ok(bytes) = self.seen.recv_timeout(Duration::from_millis(100)) {
                self.text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }

    /// Everything the terminal showed so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn exit_code(&mut self) -> Option<i32> {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.client.try_wait().unwrap() {
                return status.code();
            }
            assert!(t0.elapsed() < T, "the client did not exit:\n{}", self.text);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub fn free_gpus(pool: &Pool) -> u64 {
    let nodes: serde_json::Value = serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap();
    nodes[0]["gpus_free"].as_u64().unwrap()
}

#[test]
fn a_session_sees_its_gpus_and_exiting_frees_them() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let mut term = Terminal::open(&pool, &["run", "--pty", "-G", "1", "bash", "--norc"]);
    term.expect("labpool: job 1 on ");
    // The shell's prompt: typing before it may be dropped as the shell sets its terminal up.
    term.expect("$ ");
    term.type_line("echo GPUS=[$CUDA_VISIBLE_DEVICES] in $SLURM_JOB_PARTITION; tty");
    term.expect("GPUS=[0] in interactive");
    term.expect("/dev/pts/");
    let job = pool.job(1);
    assert_eq!(
        (s(&job, "state"), s(&job, "partition")),
        ("RUNNING", "interactive")
    );
    assert_eq!(free_gpus(&pool), 1);
    // The window is resized: the shell's terminal follows.
    term.resize(50, 132);
    // The client passes it on within 100 ms; the shell asks until it sees it, or 5 s.
    term.type_line(
        "for i in $(seq 50); do s=$(stty size); [ \"$s\" = \"50 132\" ] && break; sleep 0.1; done; echo size=$s",
    );
    term.expect("size=50 132");
    term.type_line("exit 3");
    assert_eq!(term.exit_code(), Some(3));
    let job = pool.wait_done(1, T);
    assert_eq!(job["exit_code"], 3, "{job:#}");
    assert_eq!(free_gpus(&pool), 2);
}

#[test]
fn an_idle_session_without_gpus_is_told_then_stopped() {
    let mut pool = Pool::new("1:a100");
    pool.edit_config(|t| {
        t.replacen(
            "[jobs]\n",
            "[jobs]\ninteractive_idle = \"2s\"\nidle_grace = \"1s\"\n",
            1,
        )
        .replace("# sample_interval = \"5s\"", "sample_interval = \"200ms\"")
    });
    pool.start();
    let mut term = Terminal::open(&pool, &["run", "--pty", "bash", "--norc"]);
    term.expect("$ ");
    term.type_line("echo started");
    term.expect("started");
    let t0 = Instant::now();
    term.expect("this session has been idle (no input for 2s); it stops in 1s");
    assert!(t0.elapsed() >= Duration::from_millis(1500));
    term.expect("session 1 was stopped by the idle rule");
    term.exit_code();
    assert_eq!(s(&pool.wait_done(1, T), "state"), "CANCELLED");
}

#[test]
fn srun_pty_from_a_login_shell_is_a_session_too() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let mut term = Terminal::open_with(
        &pool,
        &bin.join("srun"),
        &["--pty", "-t", "10", "bash", "--norc"],
    );
    term.expect("$ ");
    term.type_line("echo limit=$LABPOOL_TIME_LIMIT_S; exit");
    term.expect("limit=600");
    assert_eq!(term.exit_code(), Some(0));
    assert_eq!(s(&pool.wait_done(1, T), "state"), "COMPLETED");
}

#[test]
fn salloc_gives_a_shell_whose_srun_runs_steps_on_the_allocation() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let mut term = Terminal::open_with(
        &pool,
        &bin.join("salloc"),
        &["-n", "2", "--gpus-per-task", "1", "bash", "--norc"],
    );
    term.expect("$ ");
    term.type_line("srun bash -c 'echo rank=$SLURM_PROCID gpu=$CUDA_VISIBLE_DEVICES'");
    term.expect("rank=0 gpu=0");
    term.expect("rank=1 gpu=1");
    term.type_line("exit");
    assert_eq!(term.exit_code(), Some(0));
    let job = pool.wait_done(1, T);
    assert_eq!((s(&job, "name"), s(&job, "state")), ("bash", "COMPLETED"));
    assert_eq!(job["steps"][0]["tasks"], 2, "{job:#}");
}
