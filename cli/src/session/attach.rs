//! The client side of a session: queue the job, wait for it to start, and join this terminal
//! to its shell (raw mode, so keys and screens pass through), until the shell ends or this
//! terminal detaches (Ctrl-] then d, or a lost connection); and join a running session again
//! ([`attach_again`]).

use super::conn::{Conn, Frame};
use crate::api::sessions::SessionView;
use crate::api::{CancelRequest, JobView, NodeView, SubmitRequest, Submitted};
use crate::client::Client;
use crate::controller::http::JobDetail;
use labpool_scheduler::JobState;
use nix::sys::termios::{SetArg, Termios, cfmakeraw, tcgetattr, tcsetattr};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a started session's socket may take to appear.
const SOCKET_WITHIN: Duration = Duration::from_secs(30);

/// How long after its connection closed a session still running is taken as detached (the
/// connection was lost), not ended.
const RUNS_ON_AFTER: Duration = Duration::from_secs(5);

/// Puts the terminal back as it was, however the session ends.
struct RawMode(Option<Termios>);

impl RawMode {
    fn enter() -> RawMode {
        let stdin = std::io::stdin();
        let Ok(saved) = tcgetattr(&stdin) else {
            return RawMode(None); // not a terminal: bytes pass as they are
        };
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &raw);
        RawMode(Some(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, saved);
        }
    }
}

nix::ioctl_read_bad!(tiocgwinsz, nix::libc::TIOCGWINSZ, nix::pty::Winsize);

/// This terminal's size, or 24x80.
fn window() -> (u16, u16) {
    let mut w = nix::pty::Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills the struct it is given.
    match unsafe { tiocgwinsz(0, &mut w) } {
        Ok(_) if w.ws_row > 0 => (w.ws_row, w.ws_col),
        _ => (24, 80),
    }
}

/// Queues `req` (a session host script), waits for it, and attaches; returns the shell's exit
/// code. Ctrl-C while it waits cancels the job.
pub async fn attach(
    client: &Client,
    req: &SubmitRequest,
    socket: &std::path::Path,
    token: &str,
) -> anyhow::Result<i32> {
    let submitted: Submitted = client.post("/v1/jobs", req).await?;
    let id = submitted.job_id;
    let job = tokio::select! {
        j = wait_started(client, id) => j?,
        _ = tokio::signal::ctrl_c() => {
            let _: serde_json::Value = client
                .post("/v1/jobs/cancel", &CancelRequest { ids: vec![id.to_string()] })
                .await?;
            anyhow::bail!("job {id} cancelled before it started");
        }
    };
    if job.state != JobState::Running {
        anyhow::bail!(
            "job {id} ended {} before the session began{}",
            job.state,
            job.reason_detail
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        );
    }
    let me = nix::unistd::geteuid().as_raw();
    join(client, &job, socket, token, me, false).await
}

/// `labpool attach JOB` (and `sattach JOB`): joins a running session again, from this machine
/// or any other of the pool, with its screen redrawn. Only its owner (or an admin) is told where
/// it answers. Returns the shell's exit code when it ends while attached.
/// `quiet` leaves out the line naming the job and its node (`sattach -Q`).
pub async fn attach_again(client: &Client, id: u64, quiet: bool) -> anyhow::Result<i32> {
    let view: SessionView = client.get(&format!("/v1/jobs/{id}/session")).await?;
    let d: JobDetail = client.get(&format!("/v1/jobs/{id}")).await?;
    join(client, &d.job, &view.socket, &view.token, view.uid, quiet).await
}

/// Joins this terminal to the running session `job`: on its Unix socket when the session began
/// on this machine (served by `owner`, or not talked to), else on its session port with
/// `token`. Returns when the shell ends, or when this terminal detaches.
async fn join(
    client: &Client,
    job: &JobView,
    socket: &std::path::Path,
    token: &str,
    owner: u32,
    quiet: bool,
) -> anyhow::Result<i32> {
    let id = job.id;
    // On this machine the socket appears; on another, the job's session port answers.
    let remote = remote_address(client, job).await;
    let t0 = Instant::now();
    // Why the last connection was not taken, for the error when none is.
    let mut last;
    let stream: Box<dyn Conn> = loop {
        match UnixStream::connect(socket) {
            Ok(s) => match served_by(&s, owner) {
                Ok(()) => break Box::new(s),
                Err(why) => last = format!("{}: {why}", socket.display()),
            },
            Err(e) => last = format!("{}: {e}", socket.display()),
        }
        if let Some((host, port)) = &remote
            && let Ok(s) = std::net::TcpStream::connect((host.as_str(), *port))
        {
            match crate::link_auth::client(&s, token) {
                Ok(()) => break Box::new(s),
                Err(e) => last = format!("{host}:{port}: {e}"),
            }
        }
        if t0.elapsed() > SOCKET_WITHIN {
            anyhow::bail!(
                "job {id} runs on {} but its session is not reachable from here ({last}); the job's ports under [jobs] ports must be open between the nodes",
                job.node.as_deref().unwrap_or("?"),
            )
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if !quiet {
        eprintln!(
            "labpool: job {id} on {} with GPUs {} (detach: Ctrl-] then d)",
            job.node.as_deref().unwrap_or("?"),
            if job.gpus.is_empty() {
                "none".to_string()
            } else {
                crate::render::gpu_list(&job.gpus)
            }
        );
    }
    let detached = relay(stream)?;
    // The shell has ended, so the job does; or this terminal let go, and it runs on.
    let t0 = Instant::now();
    loop {
        let d: JobDetail = client.get(&format!("/v1/jobs/{id}")).await?;
        if !matches!(
            d.job.state,
            JobState::Pending | JobState::Staging | JobState::Running
        ) {
            if let Some(e) = d.events.iter().rev().find(|e| e.event == "IDLE_STOPPED") {
                eprintln!(
                    "\nlabpool: session {id} was stopped by the idle rule: {}; its GPUs went back to the pool",
                    e.detail.as_deref().unwrap_or("idle")
                );
            }
            return Ok(d.job.exit_code.unwrap_or(0));
        }
        if detached || t0.elapsed() > RUNS_ON_AFTER {
            eprintln!(
                "\nlabpool: detached from session {id}, which runs on; `labpool attach {id}` joins it again (from any machine of the pool)"
            );
            return Ok(0);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `Ok` when the process at the other end of `s` runs as `owner`, the session's owner, as its
/// host does: a socket someone else put in its place is never talked to.
fn served_by(s: &UnixStream, owner: u32) -> Result<(), String> {
    let cred = nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| format!("cannot tell who serves it: {e}"))?;
    if cred.uid() != owner {
        return Err(format!(
            "it is served by uid {}, not by the session's owner (uid {owner}); not used",
            cred.uid()
        ));
    }
    Ok(())
}

/// Waits until job `id` runs or ends, saying once that it waits.
pub async fn wait_started(client: &Client, id: u64) -> anyhow::Result<JobView> {
    let t0 = Instant::now();
    let mut told = false;
    let mut every = Duration::from_millis(50);
    loop {
        let d: JobDetail = client.get(&format!("/v1/jobs/{id}")).await?;
        if !matches!(d.job.state, JobState::Pending | JobState::Staging) {
            return Ok(d.job);
        }
        if !told && t0.elapsed() > Duration::from_secs(2) {
            eprintln!(
                "labpool: job {id} is waiting ({}); Ctrl-C cancels it",
                d.job.reason.as_deref().unwrap_or("queued")
            );
            told = true;
        }
        tokio::time::sleep(every).await;
        every = (every * 2).min(Duration::from_millis(500));
    }
}

/// Set by SIGWINCH: this terminal changed size.
static WINCH: AtomicBool = AtomicBool::new(false);

extern "C" fn on_winch(_: nix::libc::c_int) {
    WINCH.store(true, Ordering::Relaxed);
}

/// Notes each SIGWINCH in [`WINCH`].
fn watch_window() {
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_winch),
        nix::sys::signal::SaFlags::SA_RESTART,
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    let _ = unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGWINCH, &action) };
}

/// Where a session on another machine answers: the job's node's agent host, and its session
/// port; `None` for a job without leased ports or a node without an agent (the local node).
async fn remote_address(client: &Client, job: &JobView) -> Option<(String, u16)> {
    let port = job.ports?.first.checked_add(1)?;
    let nodes: Vec<NodeView> = client.get("/v1/nodes").await.ok()?;
    let agent = nodes
        .into_iter()
        .find(|n| Some(&n.name) == job.node.as_ref())?
        .agent?;
    let host = agent.rsplit_once(':').map_or(agent.as_str(), |(h, _)| h);
    Some((host.trim_matches(['[', ']']).to_string(), port))
}

/// Ctrl-] then `d`: the key that detaches this terminal, as telnet's Ctrl-] escapes. Ctrl-]
/// followed by anything else passes both on; Ctrl-] twice sends one.
#[derive(Default)]
pub struct DetachKey {
    pending: bool,
}

/// Ctrl-].
const ESCAPE: u8 = 0x1d;

impl DetachKey {
    /// The bytes of `typed` to send on, and whether the detach key was completed.
    pub fn feed(&mut self, typed: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::with_capacity(typed.len());
        for &b in typed {
            if self.pending {
                self.pending = false;
                match b {
                    b'd' => return (out, true),
                    ESCAPE => out.push(ESCAPE),
                    other => out.extend([ESCAPE, other]),
                }
            } else if b == ESCAPE {
                self.pending = true;
            } else {
                out.push(b);
            }
        }
        (out, false)
    }
}

/// Joins this terminal to the session until the session closes the connection; true when this
/// terminal detached (the detach key).
fn relay(stream: Box<dyn Conn>) -> anyhow::Result<bool> {
    let (rows, cols) = window();
    let mut first = stream.dup()?;
    first.write_all(format!("{rows} {cols}\n").as_bytes())?;
    let to_host = Arc::new(Mutex::new(first));
    let send = move |to: &Mutex<Box<dyn Conn>>, f: Frame| {
        to.lock().expect("not poisoned").write_all(&f.encode())
    };
    let detached = Arc::new(AtomicBool::new(false));
    let _raw = RawMode::enter();
    {
        let (to_host, detached) = (to_host.clone(), detached.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            let mut stdin = std::io::stdin();
            let mut key = DetachKey::default();
            while let Ok(n) = stdin.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let (bytes, detach) = key.feed(&buf[..n]);
                if !bytes.is_empty() && send(&to_host, Frame::Input(bytes)).is_err() {
                    break;
                }
                if detach {
                    detached.store(true, Ordering::Relaxed);
                    to_host.lock().expect("not poisoned").close();
                    break;
                }
            }
        });
    }
    // A resized window: the flag a SIGWINCH handler sets, passed on as a frame.
    watch_window();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(100));
            if WINCH.swap(false, Ordering::Relaxed) {
                let (rows, cols) = window();
                if send(&to_host, Frame::Resize(rows, cols)).is_err() {
                    break;
                }
            }
        }
    });
    let mut from_host = stream;
    let mut stdout = std::io::stdout();
    let mut buf = [0u8; 4096];
    while let Ok(n) = from_host.read(&mut buf) {
        if n == 0 {
            break;
        }
        stdout.write_all(&buf[..n])?;
        stdout.flush()?;
    }
    Ok(detached.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_close_bracket_then_d_detaches_and_anything_else_passes() {
        let mut k = DetachKey::default();
        assert_eq!(k.feed(b"ls\r"), (b"ls\r".to_vec(), false));
        assert_eq!(k.feed(&[b'a', ESCAPE]), (b"a".to_vec(), false));
        assert_eq!(k.feed(b"d"), (Vec::new(), true));
        let mut k = DetachKey::default();
        assert_eq!(k.feed(&[ESCAPE, b'x']), (vec![ESCAPE, b'x'], false));
        assert_eq!(k.feed(&[ESCAPE, ESCAPE, b'd']), (vec![ESCAPE, b'd'], false));
        assert_eq!(k.feed(&[b'q', ESCAPE, b'd', b'z']), (b"q".to_vec(), true));
    }
}
