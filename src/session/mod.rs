//! Interactive sessions (`labpool run --pty bash`, `srun --pty bash` outside a job): a job
//! whose script is [`host`], which gives a shell on a pseudo-terminal inside the job (its
//! GPUs, its environment, its cgroups) and serves it on a Unix socket; and [`attach`], the
//! client that queues the job, waits for it, and joins the user's terminal to that shell.
//!
//! The socket lives in `/tmp/labpool-sessions-UID/RANDOM.sock` (0700, the user's), so the
//! client reaches it where the job runs on the same machine: the one-box pool, or a node the
//! user is logged in to. Exiting the shell ends the job and frees its GPUs; a lost terminal
//! closes the socket, which ends the shell; a session with no input for
//! `[jobs] interactive_idle` (1 h by default) is stopped with a notice.

pub mod attach;
pub mod conn;
pub mod host;

use std::path::PathBuf;

/// Where `uid`'s session sockets live.
pub fn socket_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/labpool-sessions-{uid}"))
}
