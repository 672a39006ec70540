//! Copying a revision into the store: a child process of the caller's (`labpool model export`)
//! reads the files with the caller's own permissions and writes a tar stream; the controller
//! imports it, hashing each file as it writes it. A member can add only what they can read,
//! and nothing of theirs is left writable in the store.

use crate::error::ApiError;
use crate::identity::{Caller, groups_of};
use labpool_cache::hub::RepoId;
use labpool_cache::hub::import::{Imported, import};
use labpool_isolation::{Identity, Sandbox};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The largest file a model may hold: 256 GiB (the hub's own limit is 50 GB a file).
pub const MAX_FILE_BYTES: u64 = 256 << 30;

/// The most of the exporter's error output kept for the answer.
const MAX_STDERR: u64 = 16 * 1024;

/// Copies `repo`'s `revision` from `from`, read as `caller`, into `root`.
pub async fn copy(
    caller: &Caller,
    from: &Path,
    repo: &RepoId,
    revision: &str,
    root: PathBuf,
) -> Result<Imported, ApiError> {
    let exe = std::env::current_exe().map_err(ApiError::internal)?;
    let mut cmd = Command::new(exe);
    cmd.args(["model", "export"])
        .arg(from)
        .args(["--repo", &repo.as_string(), "--revision", revision])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let as_root = nix::unistd::geteuid().is_root();
    let identity = (as_root && caller.uid != 0).then(|| Identity {
        uid: caller.uid,
        gid: caller.gid,
        groups: groups_of(&caller.user, caller.gid),
    });
    Sandbox::new(identity, None, None)
        .map_err(ApiError::internal)?
        .apply(&mut cmd);
    let (repo, revision) = (repo.clone(), revision.to_string());
    tokio::task::spawn_blocking(move || {
        let existed = root.exists();
        let result = run(cmd, &root, &repo, &revision);
        // A refused first revision leaves nothing behind: no tree, no empty namespace.
        if result.is_err() && !existed {
            let _ = std::fs::remove_dir_all(&root);
            if let Some(parent) = root.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
        result
    })
    .await
    .map_err(ApiError::internal)?
}

/// Runs the exporter and imports what it writes.
fn run(mut cmd: Command, root: &Path, repo: &RepoId, revision: &str) -> Result<Imported, ApiError> {
    let mut child = cmd
        .spawn()
        .map_err(|e| ApiError::internal(format!("cannot start the model export: {e}")))?;
    let stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.take(MAX_STDERR).read_to_string(&mut text);
        text
    });
    let stdout = child.stdout.take().expect("piped");
    let imported = import(root, repo, revision, stdout, MAX_FILE_BYTES);
    // A refused import leaves the exporter writing into a closed pipe: it ends there.
    let status = child.wait().map_err(ApiError::internal)?;
    let said = errors.join().unwrap_or_default();
    let said = said.trim().trim_start_matches("error: ");
    match imported {
        Ok(i) if status.success() => Ok(i),
        _ if !status.success() && !said.is_empty() => {
            Err(ApiError::bad_request(said.to_string(), None))
        }
        Err(e) => Err(ApiError::bad_request(e.to_string(), None)),
        Ok(_) => Err(ApiError::bad_request(
            format!("reading the model failed ({status})"),
            None,
        )),
    }
}
