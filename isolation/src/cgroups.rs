//! A job's cgroups: made before it starts, joined by its first process between fork and exec,
//! read for OOM kills when it ends, removed once empty.

use crate::{Hierarchy, JobIsolation, Support};
use backon::{BlockingRetryable, ConstantBuilder};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// A job's groups, made by the shim; removed on drop once empty.
pub struct JobCgroups {
    dirs: Vec<PathBuf>,
    procs: Vec<File>,
    memory: Option<(Hierarchy, PathBuf)>,
}

impl JobCgroups {
    /// Makes the job's groups and writes its rules. An error means the job must not start.
    pub fn create(iso: &JobIsolation) -> io::Result<JobCgroups> {
        let mut groups = JobCgroups {
            dirs: Vec::new(),
            procs: Vec::new(),
            memory: None,
        };
        let context =
            |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        if let Some(h) = &iso.devices {
            let dir = groups.make(h, &iso.name)?;
            match h {
                Hierarchy::V1(_) => {
                    for (major, minor) in &iso.denied {
                        write_file(
                            &dir.join("devices.deny"),
                            &Hierarchy::device_rule((*major, *minor)),
                        )
                        .map_err(context(format!(
                            "cannot deny device {major}:{minor} in {}",
                            dir.display()
                        )))?;
                    }
                }
                Hierarchy::V2(_) => {
                    let majors: std::collections::BTreeSet<u32> =
                        iso.denied.iter().map(|(major, _)| *major).collect();
                    for major in majors {
                        let minors: Vec<u32> = iso
                            .denied
                            .iter()
                            .filter(|(m, _)| *m == major)
                            .map(|(_, minor)| *minor)
                            .collect();
                        crate::device_filter::attach(&dir, major, &minors)?;
                    }
                }
            }
        }
        if let (Some(h), Some(bytes)) = (&iso.memory, iso.mem_bytes) {
            let dir = if iso.devices.as_ref() == Some(h) {
                h.job_dir(&iso.name)
            } else {
                groups.make(h, &iso.name)?
            };
            match h {
                Hierarchy::V1(_) => {
                    write_file(&dir.join("memory.limit_in_bytes"), &bytes.to_string()).map_err(
                        context(format!("cannot set the memory limit in {}", dir.display())),
                    )?;
                    // Swap counts too, so a job cannot grow past its limit by swapping.
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write_file(&memsw, &bytes.to_string())?;
                    }
                }
                Hierarchy::V2(_) => {
                    write_file(&dir.join("memory.max"), &bytes.to_string()).map_err(context(
                        format!("cannot set memory.max in {}", dir.display()),
                    ))?;
                    let _ = write_file(&dir.join("memory.swap.max"), "0");
                }
            }
            groups.memory = Some((h.clone(), dir));
        }
        Ok(groups)
    }

    fn make(&mut self, h: &Hierarchy, name: &str) -> io::Result<PathBuf> {
        let parent = h.root().join("labpool");
        match std::fs::create_dir(&parent) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create cgroup {}: {e}", parent.display()),
                ));
            }
            _ => {}
        }
        if let Hierarchy::V2(root) = h {
            // The controller must be enabled for children at every level down to the job.
            let _ = write_file(&root.join("cgroup.subtree_control"), "+memory");
            let _ = write_file(&parent.join("cgroup.subtree_control"), "+memory");
        }
        let dir = parent.join(name);
        // A left-over group of the same attempt (a shim that died) is reused if empty.
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create cgroup {}: {e}", dir.display()),
                ));
            }
            _ => {}
        }
        self.dirs.push(dir.clone());
        let procs = OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot open {}/cgroup.procs: {e}", dir.display()),
                )
            })?;
        self.procs.push(procs);
        Ok(dir)
    }

    /// File descriptors of the groups' `cgroup.procs`, for [`join_in_child`].
    pub fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Pids still in the job's groups.
    pub fn pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for dir in &self.dirs {
            let text = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// When the kernel killed a process of the job for its memory limit: the peak, in bytes.
    pub fn oom_killed(&self) -> Option<u64> {
        let (h, dir) = self.memory.as_ref()?;
        let (file, peak_file) = match h {
            Hierarchy::V1(_) => ("memory.oom_control", "memory.max_usage_in_bytes"),
            Hierarchy::V2(_) => ("memory.events", "memory.peak"),
        };
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        let kills: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if kills == 0 {
            return None;
        }
        let peak = std::fs::read_to_string(dir.join(peak_file))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        Some(peak)
    }
}

impl Drop for JobCgroups {
    fn drop(&mut self) {
        self.procs.clear();
        for dir in &self.dirs {
            // Empty once every process is gone; a group that is still busy is left for the
            // next attempt with the same name to reuse.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The memory an attempt's group holds now, bytes (`memory.usage_in_bytes` on v1,
/// `memory.current` on v2); None where there is no memory group for it.
pub fn memory_used(support: &Support, name: &str) -> Option<u64> {
    let h = support.memory.as_ref()?;
    let file = match h {
        Hierarchy::V1(_) => "memory.usage_in_bytes",
        Hierarchy::V2(_) => "memory.current",
    };
    std::fs::read_to_string(h.job_dir(name).join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Removes an attempt's groups after its shim died without removing them: any process still
/// in them is killed first (it has no shim to answer for it).
pub fn remove_groups(support: &Support, name: &str) {
    let mut dirs: Vec<PathBuf> = [&support.devices, &support.memory]
        .into_iter()
        .flatten()
        .map(|h| h.job_dir(name))
        .collect();
    dirs.dedup();
    for dir in dirs {
        if !dir.exists() {
            continue;
        }
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // The killed processes leave the group a moment after the signal: busy until then.
        let _ = (|| std::fs::remove_dir(&dir))
            .retry(
                ConstantBuilder::new()
                    .with_delay(std::time::Duration::from_millis(20))
                    .with_max_times(50),
            )
            .when(|e| e.raw_os_error() == Some(nix::libc::EBUSY))
            .call();
    }
}

/// Moves the calling process into each group: for the child between fork and exec, so only
/// async-signal-safe calls (one `write` per group; "0" means the writer).
pub(crate) fn join_in_child(fds: &[RawFd]) -> io::Result<()> {
    for fd in fds {
        // SAFETY: write(2) on an fd opened before the fork, with a static buffer.
        let n = unsafe { nix::libc::write(*fd, b"0".as_ptr().cast(), 1) };
        if n != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(path)?;
    f.write_all(text.as_bytes())
}
