//! One directory per job attempt in the node's spool. It is how a job outlives its agent:
//!
//! ```text
//! SPOOL/jobs/ID.ATTEMPT/   root, 0711
//!     spec.json            what the shim runs, with the job's environment (0600)
//!     lock                 held (flock) by the shim for as long as it lives; holds its pid
//!     .started.json.reserved, .status.json.reserved
//!                          room the shim sets aside before it starts the script, so that the
//!                          two records below can be written on a full disk: each is written
//!                          into its reserved file in place, then renamed
//!     started.json         written by the shim once the script runs: its pid and process group
//!     status.json          written by the shim when the script ends (fsync, then rename)
//!     fenced               written by a restarted agent for an attempt that never started:
//!                          a late shim sees it and exits without running anything
//!     shim.log             the shim's own messages
//!     user/                the job user's corner: a small tmpfs of its own, never the state
//!                          file system (see [`crate::corner`])
//!     user/script          the job's script, owned by the job's user (0700)
//!     user/steps.jsonl     the job's `srun` steps, one JSON record a line, written by `srun`
//!     bin/srun, bin/scontrol  links to labpool, first on the job's PATH
//! ```
//!
//! Liveness is the lock, not a pid: a pid can be reused and a zombie still answers `kill 0`,
//! but a lock is released the moment its holder dies.

use crate::api::agent::Outcome;
pub use crate::atomic_file::write_atomic;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The names a job's `PATH` links to labpool (the Slurm names a job calls, and labpool).
pub const JOB_COMMANDS: [&str; 3] = ["srun", "scontrol", "labpool"];

/// Bytes set aside for each record the shim must be able to write once the script runs.
const RESERVED: usize = 4096;

/// The records the shim reserves room for before it starts the script.
pub const RESERVED_RECORDS: [&str; 2] = ["started.json", "status.json"];

/// What the shim records once the script runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    /// The shim's pid.
    pub shim_pid: i32,
    /// The job's process group (the script's pid).
    pub pgid: i32,
    /// When the script started, ms since the epoch.
    pub start_time_ms: i64,
}

/// What a look at an attempt's directory found.
#[derive(Debug)]
pub enum Liveness {
    /// A shim holds the lock: the job is running (or ending).
    Alive,
    /// The shim recorded the end.
    Ended(Outcome),
    /// The script started but its shim died without recording the end.
    Died,
    /// The script never started; the attempt is now fenced, so it never will.
    NeverStarted,
}

/// An attempt's directory.
#[derive(Debug, Clone)]
pub struct JobDir {
    path: PathBuf,
    /// Job id.
    pub job: u64,
    /// Attempt.
    pub attempt: u32,
}

impl JobDir {
    /// The directory of `job`'s `attempt` under `spool`.
    pub fn new(spool: &Path, job: u64, attempt: u32) -> JobDir {
        JobDir {
            path: spool.join("jobs").join(format!("{job}.{attempt}")),
            job,
            attempt,
        }
    }

    /// Every attempt directory under `spool`, in job order.
    pub fn list(spool: &Path) -> io::Result<Vec<JobDir>> {
        let mut out = Vec::new();
        let dir = spool.join("jobs");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let name = entry?.file_name();
            let Some((j, a)) = name.to_str().and_then(|n| n.split_once('.')) else {
                continue;
            };
            if let (Ok(job), Ok(attempt)) = (j.parse(), a.parse()) {
                out.push(JobDir::new(spool, job, attempt));
            }
        }
        out.sort_by_key(|d| (d.job, d.attempt));
        Ok(out)
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key that marks this attempt's processes (its directory, unique on the machine).
    pub fn key(&self) -> String {
        self.path.display().to_string()
    }

    /// `spec.json`.
    pub fn spec_path(&self) -> PathBuf {
        self.path.join("spec.json")
    }

    /// `shim.log`.
    pub fn log_path(&self) -> PathBuf {
        self.path.join("shim.log")
    }

    /// `user/`, the job user's own corner.
    pub fn user_dir(&self) -> PathBuf {
        self.path.join("user")
    }

    /// `user/script`.
    pub fn script_path(&self) -> PathBuf {
        self.user_dir().join("script")
    }

    /// Creates the directory, `user/` owned by `uid:gid` (its own tmpfs as root, with `extra`
    /// bytes of room beyond the corner's own), and the script.
    pub fn create(&self, uid: u32, gid: u32, script: &str, extra: u64) -> io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(self.path.parent().expect("has a parent"))?;
        std::fs::DirBuilder::new().mode(0o711).create(&self.path)?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(self.user_dir())?;
        if let Err(e) = super::corner::mount(&self.user_dir(), uid, gid, script.len() as u64, extra)
        {
            let _ = std::fs::remove_dir_all(&self.path);
            return Err(e);
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(self.script_path())?;
        f.write_all(script.as_bytes())?;
        drop(f);
        if nix::unistd::geteuid().is_root() {
            let (u, g) = (
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            );
            nix::unistd::chown(&self.script_path(), u, g)?;
            nix::unistd::chown(&self.user_dir(), u, g)?;
        }
        Ok(())
    }

    /// `bin/`, with `srun` and `scontrol` linked to `exe`: first on the job's `PATH`.
    pub fn link_commands(&self, exe: &Path) -> io::Result<PathBuf> {
        let dir = self.path.join("bin");
        std::fs::DirBuilder::new().mode(0o755).create(&dir)?;
        for name in crate::jobdir::JOB_COMMANDS {
            std::os::unix::fs::symlink(exe, dir.join(name))?;
        }
        Ok(dir)
    }

    /// `user/steps.jsonl`: the job's `srun` steps, written by `srun` as the job's user.
    pub fn steps_path(&self) -> PathBuf {
        self.user_dir().join("steps.jsonl")
    }

    /// The steps recorded so far (none when there is no file). The job's user writes the file,
    /// so it is read only when it is a plain file (never through a link, never a FIFO that
    /// would hold the agent), and at most 1 MiB of it.
    pub fn steps(&self) -> Vec<crate::api::steps::StepRecord> {
        use std::io::Read;
        let open = crate::member_file::open_no_follow(&self.steps_path());
        let mut text = String::new();
        let read = open.and_then(|f| {
            if !f.metadata()?.is_file() {
                return Err(io::Error::other("not a plain file"));
            }
            f.take(1 << 20).read_to_string(&mut text)
        });
        match read {
            Ok(_) => crate::api::steps::read_steps(&text),
            Err(_) => Vec::new(),
        }
    }

    /// The steps file's size and change time, to tell whether it changed (None: no file).
    pub fn steps_stamp(&self) -> Option<(u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(self.steps_path()).ok()?;
        Some((m.len(), m.mtime(), m.mtime_nsec()))
    }

    /// Makes `datasets/NAME` point at each dataset's cached version, and returns that
    /// directory (`None` when the job has no datasets). The job finds its data there whatever
    /// version it was given.
    pub fn link_datasets(&self, datasets: &[(String, PathBuf)]) -> io::Result<Option<PathBuf>> {
        if datasets.is_empty() {
            return Ok(None);
        }
        let dir = self.path.join("datasets");
        std::fs::DirBuilder::new().mode(0o755).create(&dir)?;
        for (name, target) in datasets {
            std::os::unix::fs::symlink(target, dir.join(name))?;
        }
        Ok(Some(dir))
    }

    /// Writes `value` as JSON to `name` (mode 0644) so that a reader sees the old file or the
    /// whole new one, even after a power loss.
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        write_atomic(&self.path.join(name), &bytes, 0o644, true)
    }

    fn reserved_path(&self, name: &str) -> PathBuf {
        self.path.join(format!(".{name}.reserved"))
    }

    /// Sets aside room for `names`, written and synced now, so that [`JobDir::write_reserved`]
    /// needs no new space later. An error means the room is not there: the script must not
    /// start, since its start and end could not be recorded.
    /// On an error nothing is left set aside, so the attempt still reads as never started.
    pub fn reserve(&self, names: &[&str]) -> io::Result<()> {
        let made = (|| {
            for name in names {
                let mut f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o644)
                    .open(self.reserved_path(name))?;
                f.write_all(&[b' '; RESERVED])?;
                f.sync_all()?;
            }
            File::open(&self.path)?.sync_all()
        })();
        if made.is_err() {
            for name in names {
                let _ = std::fs::remove_file(self.reserved_path(name));
            }
        }
        made
    }

    /// True once room was set aside: from then on the shim may have started the script.
    pub fn reserved(&self) -> bool {
        RESERVED_RECORDS
            .iter()
            .any(|n| self.reserved_path(n).exists() || self.path.join(n).exists())
    }

    /// Writes `value` as JSON to `name` in the room [`JobDir::reserve`] set aside (padded with
    /// spaces, which JSON allows, so no block is added), then renames it into place; where no
    /// room was set aside, or the value does not fit, as [`JobDir::write_json`] does.
    pub fn write_reserved<T: Serialize>(&self, name: &str, value: &T) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        let reserved = self.reserved_path(name);
        if bytes.len() > RESERVED || !reserved.exists() {
            return write_atomic(&self.path.join(name), &bytes, 0o644, true);
        }
        let mut f = OpenOptions::new().write(true).open(&reserved)?;
        f.write_all(&bytes)?;
        f.write_all(&[b' '; RESERVED][bytes.len()..])?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&reserved, self.path.join(name))?;
        File::open(&self.path)?.sync_all()
    }

    /// Writes the shim's spec (private: it holds the job's environment). Atomic but not synced:
    /// it matters only to the shim started right after, which a power loss kills anyway, and
    /// two fsyncs on the start path would delay every job.
    pub fn write_spec<T: Serialize>(&self, value: &T) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        write_atomic(&self.spec_path(), &bytes, 0o600, false)
    }

    fn read_json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Option<T> {
        let bytes = std::fs::read(self.path.join(name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// `status.json`, if the shim wrote it.
    pub fn status(&self) -> Option<Outcome> {
        self.read_json("status.json")
    }

    /// `started.json`, if the shim wrote it.
    pub fn started(&self) -> Option<Started> {
        self.read_json("started.json")
    }

    /// True once the attempt is fenced.
    pub fn is_fenced(&self) -> bool {
        self.path.join("fenced").exists()
    }

    fn open_lock(&self) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.path.join("lock"))
    }

    /// Takes the lock, waiting for it, and writes this process's pid into it (the shim does
    /// this first, so that a live shim can always be signalled).
    pub fn lock(&self) -> io::Result<Flock<File>> {
        let mut lock = Flock::lock(self.open_lock()?, FlockArg::LockExclusive)
            .map_err(|(_, e)| io::Error::from(e))?;
        lock.set_len(0)?;
        write!(lock, "{}", std::process::id())?;
        Ok(lock)
    }

    /// The pid of the shim that holds (or last held) the lock.
    pub fn shim_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.path.join("lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Takes the lock if nobody holds it. `None` means a shim is alive.
    pub fn try_lock(&self) -> io::Result<Option<Flock<File>>> {
        match Flock::lock(self.open_lock()?, FlockArg::LockExclusiveNonblock) {
            Ok(l) => Ok(Some(l)),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
            Err((_, e)) => Err(e.into()),
        }
    }

    /// Looks at the attempt after a restart, fencing it if it never started. Race-free against
    /// a shim that is only now starting: both sides decide while holding the lock.
    pub fn inspect(&self) -> io::Result<Liveness> {
        if !self.path.exists() {
            return Ok(Liveness::NeverStarted);
        }
        let Some(_lock) = self.try_lock()? else {
            return Ok(Liveness::Alive);
        };
        if let Some(outcome) = self.status() {
            return Ok(Liveness::Ended(outcome));
        }
        // Room set aside means the shim went on to start the script, or was about to: it may
        // have run, so it is never started again.
        if self.reserved() {
            return Ok(Liveness::Died);
        }
        write_atomic(
            &self.path.join("fenced"),
            b"fenced by the agent: this attempt never started\n",
            0o644,
            true,
        )?;
        Ok(Liveness::NeverStarted)
    }

    /// Frees the job user's corner (`user/`) and what the job wrote there, once its end and
    /// steps were read.
    pub fn release_corner(&self) {
        super::corner::release(&self.user_dir());
    }

    /// Removes the directory, its corner first.
    pub fn remove(&self) -> io::Result<()> {
        self.release_corner();
        crate::slice::remove_container_dir(&self.path);
        match std::fs::remove_dir_all(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// The last `n` lines of the shim's log, for error messages.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The job's user owns the steps file: a FIFO there must not hold the agent that reads it
    /// (an open for reading waits for a writer), nor a link lead it to another file.
    #[test]
    fn a_fifo_or_a_link_in_place_of_the_steps_file_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let d = JobDir::new(tmp.path(), 7, 1);
        std::fs::create_dir_all(d.user_dir()).unwrap();
        nix::unistd::mkfifo(
            &d.steps_path(),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = d.clone();
        std::thread::spawn(move || tx.send(reader.steps()).unwrap());
        let steps = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO as the steps file held the agent");
        assert!(steps.is_empty());
        std::fs::remove_file(d.steps_path()).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::write(
            &elsewhere,
            r#"{"step":0,"name":"x","tasks":1,"start_ms":1,"end_ms":2,"exit_code":0}"#,
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, d.steps_path()).unwrap();
        assert!(d.steps().is_empty(), "a link is not followed");
        std::fs::remove_file(d.steps_path()).unwrap();
        std::fs::copy(&elsewhere, d.steps_path()).unwrap();
        assert_eq!(d.steps().len(), 1, "a plain file is read");
    }

    #[test]
    fn never_started_attempts_are_fenced_once_and_live_locks_win() {
        let tmp = tempfile::tempdir().unwrap();
        let d = JobDir::new(tmp.path(), 7, 1);
        assert!(matches!(d.inspect().unwrap(), Liveness::NeverStarted));
        d.create(
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
            "#!/bin/sh\n",
            0,
        )
        .unwrap();
        assert!(!d.is_fenced());
        {
            let _held = d.lock().unwrap();
            assert!(matches!(d.inspect().unwrap(), Liveness::Alive));
            assert!(!d.is_fenced());
        }
        assert!(matches!(d.inspect().unwrap(), Liveness::NeverStarted));
        assert!(d.is_fenced());
        assert_eq!(JobDir::list(tmp.path()).unwrap().len(), 1);
        d.remove().unwrap();
        assert!(JobDir::list(tmp.path()).unwrap().is_empty());
    }

    #[test]
    fn a_shim_that_set_room_aside_may_have_started_and_is_never_taken_for_unstarted() {
        let tmp = tempfile::tempdir().unwrap();
        let d = JobDir::new(tmp.path(), 8, 1);
        let me = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        d.create(me.0, me.1, "#!/bin/sh\n", 0).unwrap();
        d.reserve(&RESERVED_RECORDS).unwrap();
        assert!(matches!(d.inspect().unwrap(), Liveness::Died));
        assert!(!d.is_fenced());
    }

    /// On a file system with no room left, the records still land in the room set aside.
    #[test]
    fn records_are_written_into_their_room_on_a_full_file_system() {
        let Some(fs) = labpool_testkit::small_fs::SmallFs::mount("256k") else {
            return;
        };
        let tmp = fs.path();
        let d = JobDir::new(tmp, 9, 1);
        d.create(0, 0, "#!/bin/sh\n", 0).unwrap();
        d.reserve(&RESERVED_RECORDS).unwrap();
        // Fill every block that is left.
        let mut filler = File::create(tmp.join("filler")).unwrap();
        while filler.write_all(&[0u8; 4096]).is_ok() {}
        let _ = filler.sync_all();
        assert!(d.write_json("other.json", &1).is_err(), "the disk is full");
        let started = Started {
            shim_pid: 1,
            pgid: 2,
            start_time_ms: 3,
        };
        d.write_reserved("started.json", &started).unwrap();
        let outcome = Outcome::decided(labpool_scheduler::JobState::Completed, 4, "done".into());
        d.write_reserved("status.json", &outcome).unwrap();
        assert_eq!(d.started().unwrap().pgid, 2);
        assert_eq!(d.status().unwrap(), outcome);
        drop(filler);
    }
}
