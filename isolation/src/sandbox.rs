//! The one way labpool starts a process for a user: a job's script (from the shim) and an
//! environment build (from the controller) both go through [`Sandbox::apply`], so the order
//! that makes it safe is written once: unblock signals, join the job's cgroups while still
//! root, drop the supplementary groups, then the group, then the user, then change directory.

use crate::JobCgroups;
use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
use nix::unistd::{Gid, Uid};
use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Who a process runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Its user.
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
}

impl Identity {
    /// True when a process of this one must change user to become it.
    pub fn differs_from_self(&self) -> bool {
        nix::unistd::geteuid().as_raw() != self.uid
    }

    /// Runs `f` with this identity's effective ids (groups, then gid, then uid), then returns to
    /// root's: files `f` opens are opened with the user's rights. Only for a single-threaded
    /// process (the shim before it starts its threads): the effective ids are per process.
    pub fn as_effective<T>(&self, f: impl FnOnce() -> T) -> Result<T, String> {
        if !self.differs_from_self() {
            return Ok(f());
        }
        let saved = nix::unistd::getgroups().unwrap_or_default();
        nix::unistd::setgroups(&self.gids())
            .map_err(|e| format!("cannot take the groups of uid {}: {e}", self.uid))?;
        nix::unistd::setegid(Gid::from_raw(self.gid))
            .map_err(|e| format!("cannot switch to gid {}: {e}", self.gid))?;
        nix::unistd::seteuid(Uid::from_raw(self.uid))
            .map_err(|e| format!("cannot switch to uid {}: {e}", self.uid))?;
        let out = f();
        nix::unistd::seteuid(Uid::from_raw(0))
            .map_err(|e| format!("cannot return to root: {e}"))?;
        nix::unistd::setegid(Gid::from_raw(0))
            .map_err(|e| format!("cannot return to gid 0: {e}"))?;
        nix::unistd::setgroups(&saved).map_err(|e| format!("cannot restore groups: {e}"))?;
        Ok(out)
    }

    fn gids(&self) -> Vec<Gid> {
        self.groups.iter().map(|g| Gid::from_raw(*g)).collect()
    }
}

/// Where and as whom a child process starts.
#[derive(Debug, Default)]
pub struct Sandbox {
    /// The user to become; `None` (or the caller's own uid) keeps the caller's.
    pub identity: Option<Identity>,
    /// `cgroup.procs` of the groups to join ([`JobCgroups::procs_fds`]).
    pub cgroups: Vec<RawFd>,
    /// The directory to start in, entered as the user (so a directory the user may not enter
    /// fails the start).
    pub workdir: Option<CString>,
}

impl Sandbox {
    /// A sandbox for `identity`, in the groups of `cgroups` if any, starting in `workdir` if
    /// given.
    pub fn new(
        identity: Option<Identity>,
        cgroups: Option<&JobCgroups>,
        workdir: Option<&Path>,
    ) -> io::Result<Sandbox> {
        let workdir = workdir
            .map(|p| CString::new(p.as_os_str().as_bytes()))
            .transpose()?;
        Ok(Sandbox {
            identity: identity.filter(Identity::differs_from_self),
            cgroups: cgroups.map(JobCgroups::procs_fds).unwrap_or_default(),
            workdir,
        })
    }

    /// Makes `cmd` start in this sandbox, in a process group of its own (so it can be
    /// signalled as one). Everything the child does between fork and exec is prepared here.
    pub fn apply(self, cmd: &mut Command) {
        let switch = self
            .identity
            .map(|id| (id.gids(), Gid::from_raw(id.gid), Uid::from_raw(id.uid)));
        let (fds, workdir) = (self.cgroups, self.workdir);
        cmd.process_group(0);
        // SAFETY: between fork and exec the closure makes only async-signal-safe system calls
        // on data prepared before the fork; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
                crate::cgroups::join_in_child(&fds)?;
                if let Some((groups, gid, uid)) = &switch {
                    nix::unistd::setgroups(groups)?;
                    nix::unistd::setgid(*gid)?;
                    nix::unistd::setuid(*uid)?;
                }
                if let Some(dir) = &workdir {
                    nix::unistd::chdir(dir.as_c_str())?;
                }
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_for_oneself_changes_no_user_and_starts_where_asked() {
        let me = Identity {
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            groups: Vec::new(),
        };
        let dir = std::env::temp_dir();
        let sandbox = Sandbox::new(Some(me.clone()), None, Some(&dir)).unwrap();
        assert!(sandbox.identity.is_none());
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "pwd; echo $$ $(ps -o pgid= $$ 2>/dev/null || echo)"]);
        sandbox.apply(&mut cmd);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let first = text.lines().next().unwrap();
        assert_eq!(
            std::fs::canonicalize(first).unwrap(),
            std::fs::canonicalize(&dir).unwrap()
        );
        assert_eq!(me.as_effective(|| 7).unwrap(), 7);
    }
}
