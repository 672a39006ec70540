//! Interactive sessions (`labpool run --pty bash`, `srun --pty bash` outside a job): a job
//! whose script is [`host`], which gives a shell on a pseudo-terminal inside the job (its
//! GPUs, its environment, its cgroups) and serves it on a Unix socket; and [`attach`], the
//! client that queues the job, waits for it, and joins the user's terminal to that shell.
//!
//! The socket lives in a directory of the user's own, `/tmp/labpool-sessions-UID/` (0700), so
//! the client reaches it where the job runs on the same machine: the one-box pool, or a node
//! the user is logged in to. `/tmp` is everyone's, so nothing there is taken on trust
//! ([`private_dir`]): the client makes the directory before it submits, and uses a fresh one
//! with a random name when someone else's stands at that path; the host serves a socket only in
//! a directory that is the user's alone (on another machine, where the client's directory is
//! not, it serves on the job's session port only); and the client talks only to a socket whose
//! other end runs as the user. Over TCP both ends prove the session's token ([`crate::link_auth`]).
//!
//! Exiting the shell ends the job and frees its GPUs. A lost terminal (or Ctrl-] then d)
//! detaches: the shell runs on with its screen kept ([`screen`]), and `labpool attach JOB`
//! (`sattach JOB`) joins it again from any machine of the pool; the API tells only the job's
//! owner and admins where it answers (`GET /v1/jobs/{id}/session`). A session whose GPUs stay
//! under `idle_gpu_percent` and that gets no input for its partition's `idle_after` (`[jobs]
//! interactive_idle`, 1 h by default) is told, then stopped after `idle_grace` ([`report`]).

pub mod attach;
pub mod conn;
pub mod host;
pub mod notebook_host;
pub mod report;
pub mod screen;

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use crate::api::session_script::{host_command, idle_of_script};

/// Where `uid`'s session sockets live by default.
pub fn socket_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/labpool-sessions-{uid}"))
}

/// Why `dir` is not a directory that only the calling user can enter: `None` when it is (a
/// real directory, not a link, owned by this user, with no rights for group or others).
pub fn not_private(dir: &Path) -> Option<String> {
    let me = nix::unistd::geteuid().as_raw();
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("{}: {e}", dir.display())),
    };
    if !meta.file_type().is_dir() {
        return Some(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != me {
        return Some(format!(
            "{} belongs to uid {}, not to you (uid {me})",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Some(format!(
            "{} has mode {:o}: others may enter it",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    None
}

/// A directory for this user's session sockets, made if missing: [`socket_dir`] when it is the
/// user's alone, else a fresh one beside it with a random name (someone else made that path
/// first; they cannot guess the new one). The second value says why the usual one was passed
/// over.
pub fn private_dir(uid: u32) -> io::Result<(PathBuf, Option<String>)> {
    let usual = socket_dir(uid);
    match std::fs::DirBuilder::new().mode(0o700).create(&usual) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let Some(why) = not_private(&usual) else {
        return Ok((usual, None));
    };
    let fresh = tempfile::Builder::new()
        .prefix(&format!("labpool-sessions-{uid}."))
        .rand_bytes(12)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in("/tmp")?
        .keep();
    match not_private(&fresh) {
        None => Ok((fresh, Some(why))),
        Some(e) => Err(io::Error::other(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_script_is_read_back_and_nothing_else_passes_for_one() {
        let cmd = host_command(
            Path::new("/tmp/labpool-sessions-7/ab.sock"),
            std::time::Duration::from_secs(3600),
            &["bash".into(), "--norc".into()],
        )
        .unwrap();
        let script = format!("#!/bin/sh\n{cmd}\n");
        assert_eq!(
            idle_of_script(&script),
            Some(std::time::Duration::from_secs(3600))
        );
        for other in [
            "#!/bin/sh\npython train.py\n".to_string(),
            format!("#!/bin/bash\n{cmd}\n"),
            format!("#!/bin/sh\n{cmd}\npython train.py\n"),
            "#!/bin/sh\nexec labpool session-host --socket s --idle forever -- sh\n".into(),
        ] {
            assert_eq!(idle_of_script(&other), None, "{other}");
        }
    }

    #[test]
    fn only_a_directory_of_ones_own_with_no_rights_for_others_is_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(not_private(&dir), None);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(not_private(&dir).unwrap().contains("mode 1777"));
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(not_private(&link).unwrap().contains("not a directory"));
        assert!(not_private(&tmp.path().join("missing")).is_some());
    }
}
