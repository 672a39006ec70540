//! What a node offers: which cgroup hierarchies hold device rules and memory limits, found in
//! `/proc/self/mountinfo`.

use crate::JobIsolation;
use serde::{Deserialize, Serialize};
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
    pub(crate) fn root(&self) -> &Path {
        match self {
            Hierarchy::V1(p) | Hierarchy::V2(p) => p,
        }
    }

    /// The group of the job whose groups are named `name`, in this hierarchy.
    pub(crate) fn job_dir(&self, name: &str) -> std::path::PathBuf {
        self.root().join("labpool").join(name)
    }

    /// The cgroup v1 device rule for the character device `major:minor` (`c 195:0 rwm`).
    pub(crate) fn device_rule((major, minor): (u32, u32)) -> String {
        format!("c {major}:{minor} rwm")
    }

    pub(crate) fn word(&self) -> &'static str {
        match self {
            Hierarchy::V1(_) => "cgroup v1",
            Hierarchy::V2(_) => "cgroup v2",
        }
    }

    /// How devices are filtered in this hierarchy, in words.
    pub(crate) fn device_word(&self) -> &'static str {
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
        for (mount, fstype, options) in mounts(&text) {
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
                Some(root) if crate::device_filter::available() => {
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

/// Each mount in `/proc/self/mountinfo` text: its mount point, file system type and super
/// options.
pub(crate) fn mounts(mountinfo: &str) -> impl Iterator<Item = (String, &str, &str)> {
    mountinfo.lines().filter_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount = unescape(left.split(' ').nth(4)?);
        let mut fields = right.split(' ');
        let fstype = fields.next().unwrap_or_default();
        let options = fields.nth(1).unwrap_or_default();
        Some((mount, fstype, options))
    })
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
        assert_eq!(job.describe(), "devices (cgroup v1; 1 other GPU denied)");
        assert_eq!(unescape("/a\\040b"), "/a b");
    }
}
