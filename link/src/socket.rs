//! The local Unix socket the CLI talks to, shared by the controller and the agent: binding
//! it, the state lock that keeps two daemons off one state directory, and the peer's uid as the
//! kernel reports it (SO_PEERCRED), which is who the caller is.

use anyhow::Context;
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::net::UnixListener;

/// The peer of a Unix-socket connection, as the kernel reports it.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its uid; `None` when the kernel did not say.
    pub uid: Option<u32>,
}

impl Connected<IncomingStream<'_, UnixListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        Peer {
            uid: stream.io().peer_cred().ok().map(|c| c.uid()),
        }
    }
}

/// Takes the lock `file` in the state directory, so that two controllers (or two agents) never
/// share one; the lock file holds the owner's pid.
pub fn lock_state(state_dir: &Path, file: &str, what: &str) -> anyhow::Result<Flock<File>> {
    let path = state_dir.join(file);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            let pid = std::fs::read_to_string(&path).unwrap_or_default();
            anyhow::bail!(
                "another labpool {what} (pid {}) is running on {}\nhint: stop it first, or give this one its own state_dir",
                pid.trim(),
                state_dir.display()
            );
        }
        Err((_, e)) => return Err(e).with_context(|| format!("cannot lock {}", path.display())),
    };
    lock.set_len(0)?;
    write!(lock, "{}", std::process::id())?;
    Ok(lock)
}

/// Binds the API socket, replacing a stale one, and opens it to every local user: who they are
/// is read from the connection, not trusted from them.
pub fn bind_socket(path: &Path) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // We hold the controller lock, so a socket here is a dead controller's. Anything else at
    // that path is a mistake in the config, and is left alone.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            anyhow::bail!(
                "{} exists and is not a socket; refusing to replace it\nhint: point `socket` under [controller] at a free path",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}
