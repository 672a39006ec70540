//! The job side of a session: a shell on a pseudo-terminal that outlives the terminals that
//! show it. It is served on a Unix socket in its owner's private directory, and on the job's
//! session port to a client on another machine that shows the session's token first. A client
//! sends `ROWS COLS\n`, then its keys and window sizes as [`Frame`]s; the shell's bytes come
//! back as they are. A client that goes away detaches: the shell runs on with its screen kept
//! ([`Screen`]), and `labpool attach JOB` joins it again with the screen redrawn. The session
//! ends when the shell exits, at the job's time limit, or when the controller's idle rule stops
//! it (the host reports its input: [`super::report`]); where the controller cannot be reached,
//! after `idle` without input.

use super::conn::{Conn, Frame, TOKEN_VAR, session_port};
use super::screen::{Screen, window};
use crate::env_vars::{LABPOOL_NODE_ADDR, LABPOOL_PORTS};
use nix::pty::{OpenptyResult, Winsize, openpty};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the host waits for its first client to connect.
const ATTACH_WITHIN: Duration = Duration::from_secs(120);

/// How long a connection may take to say its window size (and, over TCP, to prove the token).
const HELLO_WITHIN: Duration = Duration::from_secs(10);

/// Connections being greeted at once; more wait in the listener's queue.
const GREETING_AT_MOST: usize = 8;

/// Serves `command` on `socket`, reporting to the controller at `controller` (its idle rule
/// decides); ends it itself after `idle` without input while the controller cannot be reached.
/// The exit code is the shell's.
pub fn run(
    socket: &Path,
    idle: Duration,
    command: &[String],
    controller: Option<std::path::PathBuf>,
) -> i32 {
    match serve(socket, idle, command, controller) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("labpool session: {e}");
            1
        }
    }
}

fn now_ms() -> i64 {
    crate::clock::now_ms()
}

/// Where clients connect: the Unix socket and the session port, whichever this node has.
struct Listeners {
    local: Option<UnixListener>,
    remote: Option<(TcpListener, String)>,
}

/// A connection that came in, not yet greeted.
enum Incoming {
    /// On the Unix socket, in the owner's private directory.
    Local(std::os::unix::net::UnixStream),
    /// On the session port: it must prove the token first.
    Remote(TcpStream, String),
}

/// A greeted client: its connection, the reader its frames come on, its window's size.
type Greeted = (Box<dyn Conn>, BufReader<Box<dyn Conn>>, u16, u16);

impl Listeners {
    /// A connection that came in, if any; never blocks.
    fn accept(&self) -> std::io::Result<Option<Incoming>> {
        if let Some(l) = &self.local {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    return Ok(Some(Incoming::Local(s)));
                }
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return Err(e),
                Err(_) => {}
            }
        }
        if let Some((l, token)) = &self.remote
            && let Ok((s, _)) = l.accept()
        {
            return Ok(Some(Incoming::Remote(s, token.clone())));
        }
        Ok(None)
    }
}

impl Incoming {
    /// Greets the client, within [`HELLO_WITHIN`]: over TCP, both ends prove the token; then
    /// the client says its window's size. The reader goes on to read its frames.
    fn greet(self) -> std::io::Result<Greeted> {
        let conn: Box<dyn Conn> = match self {
            Incoming::Local(s) => Box::new(s),
            Incoming::Remote(s, token) => Box::new(
                proves_token(s, &token)
                    .ok_or_else(|| std::io::Error::other("the token was not proved"))?,
            ),
        };
        conn.set_read_timeout(Some(HELLO_WITHIN))?;
        let mut reader = BufReader::new(conn.dup()?);
        let mut first = String::new();
        (&mut reader).take(64).read_line(&mut first)?;
        conn.set_read_timeout(None)?;
        let mut size = first
            .split_whitespace()
            .filter_map(|n| n.parse::<u16>().ok());
        let (rows, cols) = (size.next().unwrap_or(24), size.next().unwrap_or(80));
        Ok((conn, reader, rows, cols))
    }
}

/// Passes attachment `id`'s keys to the shell and its window sizes to the screen, until it goes
/// away or another terminal takes the session; then the session is detached from it.
fn take_input(
    mut reader: BufReader<Box<dyn Conn>>,
    id: u64,
    screen: &Screen,
    mut to_shell: std::fs::File,
    last_input: &AtomicI64,
) {
    while let Ok(frame) = Frame::read(&mut reader) {
        if !screen.holds(id) {
            break;
        }
        match frame {
            Frame::Input(bytes) => {
                last_input.store(now_ms(), Ordering::Relaxed);
                if to_shell.write_all(&bytes).is_err() {
                    break;
                }
            }
            Frame::Resize(rows, cols) => screen.resize(id, rows, cols),
        }
    }
    screen.detach(id);
}

fn serve(
    socket: &Path,
    idle: Duration,
    command: &[String],
    controller: Option<std::path::PathBuf>,
) -> std::io::Result<i32> {
    let listeners = Listeners {
        local: local_listener(socket)?,
        remote: remote_listener()?,
    };
    if listeners.local.is_none() && listeners.remote.is_none() {
        return Err(std::io::Error::other(
            "no way for the client to reach this session: its socket directory is not here and the job has no session port",
        ));
    }
    let t0 = Instant::now();
    // The first terminal: the one that queued the job. A stranger's connection to the port
    // fails the token and is passed over.
    let (first, reader, rows, cols) = loop {
        if let Some(c) = listeners.accept()?
            && let Ok(greeted) = c.greet()
        {
            break greeted;
        }
        if t0.elapsed() > ATTACH_WITHIN {
            let _ = std::fs::remove_file(socket);
            return Err(std::io::Error::other(
                "no terminal attached; the session ends",
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (r, c) = window(rows, cols);
    let winsize = Winsize {
        ws_row: r.get(),
        ws_col: c.get(),
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let OpenptyResult { master, slave } =
        openpty(Some(&winsize), None).map_err(std::io::Error::from)?;
    let mut child = spawn_on(&slave, command)?;
    drop(slave);
    let screen = Arc::new(Screen::new(
        std::fs::File::from(master.try_clone()?),
        r.get(),
        c.get(),
    ));
    let last_input = Arc::new(AtomicI64::new(now_ms()));
    let attach = |conn: Box<dyn Conn>,
                  reader: BufReader<Box<dyn Conn>>,
                  rows: u16,
                  cols: u16,
                  redraw: bool|
     -> std::io::Result<()> {
        let id = screen.attach(conn, rows, cols, redraw)?;
        let (screen, last) = (screen.clone(), last_input.clone());
        let to_shell = std::fs::File::from(master.try_clone()?);
        std::thread::spawn(move || take_input(reader, id, &screen, to_shell, &last));
        Ok(())
    };
    attach(first, reader, rows, cols, false)?;
    // The shell's bytes, onto the screen and to whoever is attached.
    let relay = {
        let mut from_shell = std::fs::File::from(master.try_clone()?);
        let screen = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the shell and everything on its terminal are gone.
            while let Ok(n) = from_shell.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen.output(&buf[..n]);
            }
        })
    };
    let job = std::env::var(crate::env_vars::LABPOOL_JOB_ID)
        .ok()
        .and_then(|j| j.parse().ok());
    let shown = screen.clone();
    let answered = super::report::start(
        controller,
        job,
        idle,
        super::report::typed_since(last_input.clone()),
        Box::new(move |text: &str| shown.notice(text)),
    );
    let (joining_tx, joining) = std::sync::mpsc::channel();
    let greeting = Arc::new(AtomicUsize::new(0));
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let hang_up = |sig| {
        let _ = nix::sys::signal::killpg(pgid, sig);
    };
    let end = |code: i32| {
        let _ = std::fs::remove_file(socket);
        Ok(code)
    };
    loop {
        if let Some(status) = child.try_wait()? {
            let _ = relay.join();
            return end(status.code().unwrap_or(1));
        }
        // A terminal attaching again: greeted on a thread of its own, attached here.
        while greeting.load(Ordering::Relaxed) < GREETING_AT_MOST
            && let Some(incoming) = listeners.accept()?
        {
            let (tx, count) = (joining_tx.clone(), greeting.clone());
            count.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || {
                if let Ok(greeted) = incoming.greet() {
                    let _ = tx.send(greeted);
                }
                count.fetch_sub(1, Ordering::Relaxed);
            });
        }
        while let Ok((conn, reader, rows, cols)) = joining.try_recv() {
            last_input.store(now_ms(), Ordering::Relaxed);
            if let Err(e) = attach(conn, reader, rows, cols, true) {
                eprintln!("labpool session: a terminal could not attach: {e}");
            }
        }
        // The controller's rule decides while it answers; this one when it has not for `idle`.
        let quiet = now_ms() - last_input.load(Ordering::Relaxed);
        let unanswered = now_ms() - answered.load(Ordering::Relaxed);
        if quiet > idle.as_millis() as i64 && unanswered > idle.as_millis() as i64 {
            screen.notice(&format!(
                "\r\nlabpool: this session had no input for {}; it ends now and its GPUs go back to the pool\r\n",
                labpool_units::format_duration(idle)
            ));
            hang_up(nix::sys::signal::Signal::SIGHUP);
            std::thread::sleep(Duration::from_millis(500));
            hang_up(nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            return end(0);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The session's Unix socket, when its directory is here and the user's alone: the client made
/// it on this machine before it submitted. Elsewhere (another node, or a directory someone
/// else made) the client is not on this machine, or must not be trusted to be: `None`.
fn local_listener(socket: &Path) -> std::io::Result<Option<UnixListener>> {
    use std::os::unix::fs::PermissionsExt;
    let Some(dir) = socket.parent() else {
        return Ok(None);
    };
    if let Some(why) = super::not_private(dir) {
        if dir.exists() {
            eprintln!(
                "labpool session: not serving on {}: {why}",
                socket.display()
            );
        }
        return Ok(None);
    }
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    Ok(Some(listener))
}

/// The session's TCP listener and token, for a client on another machine: on the job's second
/// leased port, at the node's own address (`LABPOOL_NODE_ADDR`; loopback on a one-box pool),
/// when the job has ports and the session a token.
fn remote_listener() -> std::io::Result<Option<(TcpListener, String)>> {
    let (Ok(ports), Ok(token)) = (std::env::var(LABPOOL_PORTS), std::env::var(TOKEN_VAR)) else {
        return Ok(None);
    };
    let Some(port) = session_port(&ports) else {
        return Ok(None);
    };
    let addr = std::env::var(LABPOOL_NODE_ADDR).unwrap_or_else(|_| "127.0.0.1".into());
    // Without it the session is still joined on this machine, through the socket.
    let l = match TcpListener::bind((addr.as_str(), port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "labpool session: {addr} port {port} ({e}); the session is reachable on this node only"
            );
            return Ok(None);
        }
    };
    l.set_nonblocking(true)?;
    Ok(Some((l, token)))
}

/// The connection, once its client proved it holds the session's token (and the host proved
/// it too); `None` (and it is closed) otherwise.
fn proves_token(s: TcpStream, token: &str) -> Option<TcpStream> {
    s.set_nonblocking(false).ok()?;
    s.set_read_timeout(Some(HELLO_WITHIN)).ok()?;
    crate::link_auth::host(&s, token).ok()?;
    Some(s)
}

/// Starts `command` with the terminal `slave` as its controlling terminal and standard streams.
fn spawn_on(slave: &OwnedFd, command: &[String]) -> std::io::Result<std::process::Child> {
    let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
    let (program, args) = match command.split_first() {
        Some((p, a)) => (p.clone(), a.to_vec()),
        None => (shell, Vec::new()),
    };
    let fd = slave.as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(slave.try_clone()?)
        .stdout(slave.try_clone()?)
        .stderr(slave.try_clone()?);
    // SAFETY: setsid and ioctl are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid()?;
            if libc_tiocsctty(fd) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

nix::ioctl_write_int_bad!(tiocsctty, nix::libc::TIOCSCTTY);
/// Makes `fd` the calling process's controlling terminal.
fn libc_tiocsctty(fd: i32) -> i32 {
    // SAFETY: TIOCSCTTY on a terminal descriptor this process holds.
    match unsafe { tiocsctty(fd, 0) } {
        Ok(_) => 0,
        Err(_) => -1,
    }
}
