//! Copying a revision into the store: a child process of the caller's (`labpool model export`)
//! reads the files with the caller's own permissions and writes a tar stream; the controller
//! imports it, hashing each file as it writes it. A member can add only what they can read,
//! and nothing of theirs is left writable in the store.

use crate::error::ApiError;
use crate::identity::{Caller, groups_of};
use labpool_cache::hub::import::{Imported, import};
use labpool_cache::hub::{HubError, RepoId};
use labpool_isolation::{Identity, Sandbox};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The largest file a model may hold: 256 GiB (the hub's own limit is 50 GB a file).
pub const MAX_FILE_BYTES: u64 = 256 << 30;

/// The most of the exporter's error output kept for the answer.
const MAX_STDERR: u64 = 16 * 1024;

/// An exporter that writes nothing for this long is stopped (a hung file server).
const STALLED_AFTER: Duration = Duration::from_secs(600);

/// Copies `repo`'s `revision` from `from`, read as `caller`, into `root`, through `tmp`.
pub async fn copy(
    caller: &Caller,
    from: &Path,
    repo: &RepoId,
    revision: &str,
    root: PathBuf,
    tmp: PathBuf,
) -> Result<Imported, ApiError> {
    let as_root = nix::unistd::geteuid().is_root();
    let me = crate::identity::effective_uid();
    if !as_root && caller.uid != me {
        // Without root the exporter could only run as the controller's user, who may read
        // what the caller may not.
        return Err(ApiError::forbidden(
            format!(
                "this pool runs without root, so only its own user ({}) adds models",
                crate::identity::user_name(me)
            ),
            Some("ask that user to add it, or run the controller as root".to_string()),
        ));
    }
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
        let result = run(cmd, &root, &repo, &revision, &tmp);
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

/// Runs the exporter and imports what it writes; an exporter that writes nothing for
/// [`STALLED_AFTER`] is killed.
fn run(
    mut cmd: Command,
    root: &Path,
    repo: &RepoId,
    revision: &str,
    tmp: &Path,
) -> Result<Imported, ApiError> {
    let mut child = cmd
        .spawn()
        .map_err(|e| ApiError::internal(format!("cannot start the model export: {e}")))?;
    let stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.take(MAX_STDERR).read_to_string(&mut text);
        text
    });
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (progress, done, pid) = (progress.clone(), done.clone(), child.id());
        std::thread::spawn(move || watch(&progress, &done, pid))
    };
    let stdout = Counted {
        inner: child.stdout.take().expect("piped"),
        read: progress,
    };
    let imported = import(root, repo, revision, stdout, MAX_FILE_BYTES, tmp);
    // A refused import leaves the exporter writing into a closed pipe: it ends there.
    let status = child.wait().map_err(ApiError::internal);
    done.store(true, Ordering::Relaxed);
    let stalled = watchdog.join().unwrap_or(false);
    let status = status?;
    let said = errors.join().unwrap_or_default();
    let said = said.trim().trim_start_matches("error: ");
    if stalled {
        return Err(ApiError::bad_request(
            format!(
                "reading the model stopped: nothing came for {} s, so the copy was stopped",
                STALLED_AFTER.as_secs()
            ),
            Some("check that the directory's file system answers, then add it again".into()),
        ));
    }
    match imported {
        Ok(i) if status.success() => Ok(i),
        // The import's own refusal (too large, no room) is the news, not the exporter's
        // broken pipe that followed it.
        Err(e) if !matches!(e, HubError::Malformed(_) | HubError::Empty(_)) => {
            Err(ApiError::bad_request(e.to_string(), None))
        }
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

/// Kills process `pid` when `progress` has not moved for [`STALLED_AFTER`]; returns whether it
/// did. Ends when `done` is set.
fn watch(progress: &AtomicU64, done: &AtomicBool, pid: u32) -> bool {
    let (mut last, mut since) = (0, Instant::now());
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        let now = progress.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= STALLED_AFTER {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            return true;
        }
    }
    false
}

/// A reader that counts what it reads, for the watchdog.
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}
