//! Job isolation through cgroups, where the kernel has them: a job's processes can open only
//! the GPU device nodes it was given (the cgroup v1 `devices` controller), and `--mem` becomes
//! a memory limit (cgroup v1 `memory`, or cgroup v2 `memory.max`).
//!
//! Decisions recorded here:
//! - The agent detects what the node offers once ([`Support::detect`]); the shim applies it per
//!   job ([`JobCgroups::create`]) and moves the script into the job's groups between fork and
//!   exec, so that the shim itself is never charged for, or killed with, the job.
//! - A node that offers isolation never runs a job without it: if the job's groups cannot be
//!   made, the job fails to start with the reason.
//! - Device rules deny every GPU of the node the job was not given (`c MAJOR:MINOR rwm`), rather
//!   than deny-all-then-allow, so that every other device (`/dev/null`, ttys, FUSE) keeps
//!   working in the default-allow hierarchy.
//! - On cgroup v2 there is no devices controller: an eBPF program attached to the job's group
//!   refuses the same devices (see [`crate::agent::device_filter`]). `auto` prefers the v1
//!   controller where it is mounted (hybrid hosts), since its rules show in `devices.list`.
//! - When the job's memory group records an OOM kill, the job ends `OUT_OF_MEMORY` with the
//!   limit and the peak in the reason.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// The major number of NVIDIA's GPU device nodes (`/dev/nvidiaN` is `195:N`).
pub const NVIDIA_MAJOR: u32 = 195;

/// A cgroup hierarchy that can hold a job's group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hierarchy {
    /// A cgroup v1 controller mounted at this path.
    V1(PathBuf),
    /// The cgroup v2 unified hierarchy mounted at this path.
    V2(PathBuf),
}

impl Hierarchy {
    fn root(&self) -> &Path {
        match self {
            Hierarchy::V1(p) | Hierarchy::V2(p) => p,
        }
    }

    fn word(&self) -> &'static str {
        match self {
            Hierarchy::V1(_) => "cgroup v1",
            Hierarchy::V2(_) => "cgroup v2",
        }
    }

    /// How devices are filtered in this hierarchy, in words.
    fn device_word(&self) -> &'static str {
        match self {
            Hierarchy::V1(_) => "cgroup v1",
            Hierarchy::V2(_) => "cgroup v2 BPF",
        }
    }
}

/// Which mechanism filters a job's devices (`[jobs] device_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceFilter {
    /// The v1 `devices` controller where it is mounted, else a BPF filter on cgroup v2.
    #[default]
    Auto,
    /// Only the v1 `devices` controller.
    CgroupV1,
    /// Only a BPF filter on cgroup v2 (also on a hybrid host that has v1 devices).
    Bpf,
}

/// What a node offers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Support {
    /// Where device rules go, if anywhere.
    pub devices: Option<Hierarchy>,
    /// Where memory limits go, if anywhere.
    pub memory: Option<Hierarchy>,
    /// Why a part is missing, in words.
    pub missing: Vec<String>,
}

impl Support {
    /// Looks at `/proc/self/mountinfo` for the controllers: the v1 `devices` controller where it
    /// is mounted, else a BPF device filter on the v2 hierarchy. Needs root: without it nothing
    /// is offered, and the reason says so.
    pub fn detect() -> Support {
        Support::detect_with(DeviceFilter::Auto)
    }

    /// Like [`Support::detect`], with the device mechanism chosen (`[jobs] device_filter`).
    pub fn detect_with(filter: DeviceFilter) -> Support {
        let mut support = Support::default();
        if !nix::unistd::geteuid().is_root() {
            support
                .missing
                .push("not running as root, so jobs cannot be put in cgroups".to_string());
            return support;
        }
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut v2: Option<PathBuf> = None;
        for line in text.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let mount = left.split(' ').nth(4).map(unescape).unwrap_or_default();
            let mut fields = right.split(' ');
            let fstype = fields.next().unwrap_or_default();
            let options = fields.nth(1).unwrap_or_default();
            match fstype {
                "cgroup" => {
                    for opt in options.split(',') {
                        match opt {
                            "devices" if support.devices.is_none() => {
                                support.devices = Some(Hierarchy::V1(mount.clone().into()))
                            }
                            "memory" if support.memory.is_none() => {
                                support.memory = Some(Hierarchy::V1(mount.clone().into()))
                            }
                            _ => {}
                        }
                    }
                }
                "cgroup2" if v2.is_none() => v2 = Some(mount.into()),
                _ => {}
            }
        }
        if support.memory.is_none()
            && let Some(root) = &v2
        {
            let controllers =
                std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                support.memory = Some(Hierarchy::V2(root.clone()));
            } else {
                support
                    .missing
                    .push("memory: the cgroup v2 hierarchy has no memory controller".to_string());
            }
        }
        match filter {
            DeviceFilter::Auto => {}
            DeviceFilter::CgroupV1 => {
                if support.devices.is_none() {
                    support.missing.push(
                        "devices: [jobs] device_filter = \"cgroup-v1\" but no v1 devices controller is mounted".to_string(),
                    );
                }
            }
            DeviceFilter::Bpf => support.devices = None,
        }
        if support.devices.is_none() && filter != DeviceFilter::CgroupV1 {
            match &v2 {
                Some(root) if crate::agent::device_filter::available() => {
                    support.devices = Some(Hierarchy::V2(root.clone()));
                }
                Some(_) => support.missing.push(
                    "devices: the kernel refused a BPF device filter (BPF switched off?)"
                        .to_string(),
                ),
                None => support.missing.push(
                    "devices: neither a v1 devices controller nor cgroup v2 is mounted".to_string(),
                ),
            }
        }
        if support.memory.is_none() && v2.is_none() {
            support
                .missing
                .push("memory: no memory cgroup controller is mounted".to_string());
        }
        support
    }

    /// No isolation at all (`[jobs] isolation = "off"`).
    pub fn off() -> Support {
        Support {
            missing: vec!["switched off in the config ([jobs] isolation = \"off\")".to_string()],
            ..Support::default()
        }
    }

    /// One line for `labpool nodes` and job records: `devices+memory (cgroup v1)`, or `none
    /// (why)`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(h) = &self.devices {
            parts.push(format!("devices ({})", h.device_word()));
        }
        if let Some(h) = &self.memory {
            parts.push(format!("memory ({})", h.word()));
        }
        let mut text = if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        };
        if !self.missing.is_empty() {
            text.push_str(&format!("; not: {}", self.missing.join("; ")));
        }
        text
    }

    /// The isolation of a job given the GPUs `given` on a node whose GPUs are `node_gpus`
    /// (index, device minor), with `mem_mib` reserved: every other GPU denied, the reservation
    /// as the memory limit. The agent applies it; the controller describes it in the record.
    pub fn for_launch(
        &self,
        key: &str,
        node_gpus: impl IntoIterator<Item = (u32, u32)>,
        given: &[u32],
        mem_mib: u64,
    ) -> JobIsolation {
        let denied = node_gpus
            .into_iter()
            .filter(|(index, _)| !given.contains(index))
            .map(|(_, minor)| (NVIDIA_MAJOR, minor))
            .collect();
        let mem = (mem_mib > 0).then(|| mem_mib * 1024 * 1024);
        self.for_job(key, denied, mem)
    }

    /// What the shim applies for a job: deny `denied` devices, limit memory to `mem_bytes`.
    /// `key` names the job's groups (unique on the machine).
    pub fn for_job(
        &self,
        key: &str,
        denied: Vec<(u32, u32)>,
        mem_bytes: Option<u64>,
    ) -> JobIsolation {
        JobIsolation {
            name: key.to_string(),
            devices: self.devices.clone(),
            denied,
            memory: self.memory.clone().filter(|_| mem_bytes.is_some()),
            mem_bytes,
        }
    }
}

/// What the shim applies for one job; in its spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobIsolation {
    /// The job's group name below `labpool/` in each hierarchy.
    pub name: String,
    /// Device hierarchy, if any.
    pub devices: Option<Hierarchy>,
    /// Devices (major, minor) the job must not open.
    pub denied: Vec<(u32, u32)>,
    /// Memory hierarchy, if a limit applies.
    pub memory: Option<Hierarchy>,
    /// The limit, bytes.
    pub mem_bytes: Option<u64>,
}

impl JobIsolation {
    /// What is in force for the job, in words (for its record).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(h) = &self.devices {
            parts.push(format!(
                "devices ({}; {} other GPU(s) denied)",
                h.device_word(),
                self.denied.len()
            ));
        }
        if let (Some(h), Some(b)) = (&self.memory, self.mem_bytes) {
            parts.push(format!(
                "memory {} ({})",
                labpool_units::format_size(b),
                h.word()
            ));
        }
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }
}

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
                        write_file(&dir.join("devices.deny"), &format!("c {major}:{minor} rwm"))
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
                        crate::agent::device_filter::attach(&dir, major, &minors)?;
                    }
                }
            }
        }
        if let (Some(h), Some(bytes)) = (&iso.memory, iso.mem_bytes) {
            let dir = if iso.devices.as_ref() == Some(h) {
                h.root().join("labpool").join(&iso.name)
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

/// Removes an attempt's groups after its shim died without removing them: any process still
/// in them is killed first (it has no shim to answer for it).
pub fn remove_groups(support: &Support, name: &str) {
    let mut dirs: Vec<PathBuf> = [&support.devices, &support.memory]
        .into_iter()
        .flatten()
        .map(|h| h.root().join("labpool").join(name))
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
        for _ in 0..50 {
            match std::fs::remove_dir(&dir) {
                Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                _ => break,
            }
        }
    }
}

/// Moves the calling process into each group: for the child between fork and exec, so only
/// async-signal-safe calls (one `write` per group; "0" means the writer).
pub fn join_in_child(fds: &[RawFd]) -> io::Result<()> {
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

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_say_what_is_in_force_and_what_is_not() {
        let s = Support {
            devices: Some(Hierarchy::V1("/sys/fs/cgroup/devices".into())),
            memory: None,
            missing: vec!["memory: no memory cgroup controller is mounted".into()],
        };
        assert_eq!(
            s.describe(),
            "devices (cgroup v1); not: memory: no memory cgroup controller is mounted"
        );
        let job = s.for_job("k", vec![(195, 1)], Some(1 << 20));
        assert_eq!(job.describe(), "devices (cgroup v1; 1 other GPU(s) denied)");
        assert_eq!(unescape("/a\\040b"), "/a b");
    }
}
