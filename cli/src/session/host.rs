//! The job side of a session: a shell on a pseudo-terminal, served to one client on a Unix
//! socket, or on the job's session port to a client on another machine that shows the
//! session's token first (`TOKEN\n`). The client then sends `ROWS COLS\n`, then its keys and
//! window sizes as [`Frame`]s; the shell's bytes come back as they are.

use super::conn::{Conn, Frame, TOKEN_VAR, session_port};
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
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// How long the host waits for its client to connect.
const ATTACH_WITHIN: Duration = Duration::from_secs(120);

/// Serves `command` on `socket`; ends it after `idle` without input. The exit code is the
/// shell's.
pub fn run(socket: &Path, idle: Duration, command: &[String]) -> i32 {
    match serve(socket, idle, command) {
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

fn serve(socket: &Path, idle: Duration, command: &[String]) -> std::io::Result<i32> {
    let local = local_listener(socket)?;
    let remote = remote_listener()?;
    if local.is_none() && remote.is_none() {
        return Err(std::io::Error::other(
            "no way for the client to reach this session: its socket directory is not here and the job has no session port",
        ));
    }
    let t0 = Instant::now();
    let stream: Box<dyn Conn> = loop {
        if let Some(l) = &local {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    break Box::new(s);
                }
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return Err(e),
                Err(_) => {}
            }
        }
        if let Some((l, token)) = &remote
            && let Ok((s, _)) = l.accept()
            && let Some(s) = proves_token(s, token)
        {
            break Box::new(s);
        }
        if t0.elapsed() > ATTACH_WITHIN {
            let _ = std::fs::remove_file(socket);
            return Err(std::io::Error::other(
                "no terminal attached; the session ends",
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if local.is_some() {
        let _ = std::fs::remove_file(socket);
    }
    drop((local, remote));
    let mut reader = BufReader::new(stream.dup()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut size = first
        .split_whitespace()
        .filter_map(|n| n.parse::<u16>().ok());
    let winsize = Winsize {
        ws_row: size.next().unwrap_or(24),
        ws_col: size.next().unwrap_or(80),
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let OpenptyResult { master, slave } =
        openpty(Some(&winsize), None).map_err(std::io::Error::from)?;
    let mut child = spawn_on(&slave, command)?;
    drop(slave);
    let last_input = Arc::new(AtomicI64::new(now_ms()));
    let closed = Arc::new(AtomicBool::new(false));
    // The client's bytes to the shell.
    {
        let mut to_shell = std::fs::File::from(master.try_clone()?);
        let (last, closed) = (last_input.clone(), closed.clone());
        std::thread::spawn(move || {
            while let Ok(frame) = Frame::read(&mut reader) {
                match frame {
                    Frame::Input(bytes) => {
                        last.store(now_ms(), Ordering::Relaxed);
                        if to_shell.write_all(&bytes).is_err() {
                            break;
                        }
                    }
                    // The kernel tells the shell's foreground jobs (SIGWINCH).
                    Frame::Resize(rows, cols) => set_window(&to_shell, rows, cols),
                }
            }
            closed.store(true, Ordering::Relaxed);
        });
    }
    // The shell's bytes to the client.
    let mut to_client = stream.dup()?;
    let relay = {
        let mut from_shell = std::fs::File::from(master);
        let mut out = stream.dup()?;
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the shell and everything on its terminal are gone.
            while let Ok(n) = from_shell.read(&mut buf) {
                if n == 0 || out.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        })
    };
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let hang_up = |sig| {
        let _ = nix::sys::signal::killpg(pgid, sig);
    };
    loop {
        if let Some(status) = child.try_wait()? {
            let _ = relay.join();
            return Ok(status.code().unwrap_or(1));
        }
        if closed.load(Ordering::Relaxed) {
            // The terminal is gone: so is the session.
            hang_up(nix::sys::signal::Signal::SIGHUP);
            std::thread::sleep(Duration::from_millis(500));
            hang_up(nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            return Ok(129);
        }
        let quiet = now_ms() - last_input.load(Ordering::Relaxed);
        if quiet > idle.as_millis() as i64 {
            let notice = format!(
                "\r\nlabpool: this session had no input for {}; it ends now and its GPUs go back to the pool\r\n",
                labpool_units::format_duration(idle)
            );
            let _ = to_client.write_all(notice.as_bytes());
            hang_up(nix::sys::signal::Signal::SIGHUP);
            std::thread::sleep(Duration::from_millis(500));
            hang_up(nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            return Ok(0);
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
nix::ioctl_write_ptr_bad!(tiocswinsz, nix::libc::TIOCSWINSZ, Winsize);

/// Gives the terminal behind `master` a new size.
fn set_window(master: &std::fs::File, rows: u16, cols: u16) {
    let w = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the struct it is given, on a terminal descriptor we hold.
    let _ = unsafe { tiocswinsz(master.as_raw_fd(), &w) };
}

/// Makes `fd` the calling process's controlling terminal.
fn libc_tiocsctty(fd: i32) -> i32 {
    // SAFETY: TIOCSCTTY on a terminal descriptor this process holds.
    match unsafe { tiocsctty(fd, 0) } {
        Ok(_) => 0,
        Err(_) => -1,
    }
}
