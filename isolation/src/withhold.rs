//! A suspended job's own GPUs, withheld: while its GPU state sits in host memory and its GPUs
//! serve other jobs, none of its processes may open them (a new `python` in its shell would
//! otherwise compute on a card lent to someone else). Its cgroup gets one more deny rule per
//! GPU, taken away again when it resumes.
//!
//! cgroup v1: the rules go to `devices.deny` and come back through `devices.allow`. cgroup v2:
//! a second filter program is attached beside the job's own (every attached program must
//! allow), and detached on resume; its descriptor is what detaches it, so it lives in the
//! [`Withheld`] value.

use crate::{Hierarchy, Support};
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// The deny rules in force for one suspended job; [`Withheld::give_back`] lifts them.
#[derive(Debug)]
pub enum Withheld {
    /// The node puts jobs in no device cgroup: nothing was withheld.
    Nothing,
    /// cgroup v1 rules written to the group's `devices.deny`.
    V1 {
        /// The job's group.
        dir: PathBuf,
        /// Each rule, as written (`c 195:0 rwm`).
        rules: Vec<String>,
    },
    /// A cgroup v2 filter program attached to the group.
    V2 {
        /// The job's group.
        dir: PathBuf,
        /// The program, to detach it with.
        prog: OwnedFd,
    },
}

/// Denies `devices` (major, minor) to every process of the job's group `name`.
pub fn withhold(support: &Support, name: &str, devices: &[(u32, u32)]) -> io::Result<Withheld> {
    let Some(h) = &support.devices else {
        return Ok(Withheld::Nothing);
    };
    let dir = h.job_dir(name);
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("the job's device cgroup {} is gone", dir.display()),
        ));
    }
    match h {
        Hierarchy::V1(_) => {
            let rules: Vec<String> = devices.iter().map(|d| Hierarchy::device_rule(*d)).collect();
            for rule in &rules {
                std::fs::write(dir.join("devices.deny"), rule).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot deny {rule} in {}: {e}", dir.display()),
                    )
                })?;
            }
            Ok(Withheld::V1 { dir, rules })
        }
        Hierarchy::V2(_) => {
            let major = devices.first().map_or(crate::NVIDIA_MAJOR, |d| d.0);
            let minors: Vec<u32> = devices.iter().map(|d| d.1).collect();
            let prog = crate::device_filter::attach_held(&dir, major, &minors)?;
            Ok(Withheld::V2 { dir, prog })
        }
    }
}

/// The processes in the job's device group `name` (its `cgroup.procs`; at most 64 KiB of it
/// is read). A member cannot take a process out of it, as they can drop a variable.
pub fn group_pids(support: &Support, name: &str) -> io::Result<Vec<i32>> {
    use std::io::Read;
    let Some(h) = &support.devices else {
        return Ok(Vec::new());
    };
    let path = h.job_dir(name).join("cgroup.procs");
    let mut text = String::new();
    std::fs::File::open(&path)?
        .take(64 * 1024)
        .read_to_string(&mut text)?;
    Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

impl Withheld {
    /// The rules [`withhold`] wrote for the same job and devices, when they can be known again
    /// without the value it returned (an agent restarted since): cgroup v1's are text, so
    /// `Some`; a cgroup v2 filter is lifted only with its program's descriptor, so `None`.
    pub fn again(support: &Support, name: &str, devices: &[(u32, u32)]) -> Option<Withheld> {
        match &support.devices {
            None => Some(Withheld::Nothing),
            Some(h @ Hierarchy::V1(_)) => Some(Withheld::V1 {
                dir: h.job_dir(name),
                rules: devices.iter().map(|d| Hierarchy::device_rule(*d)).collect(),
            }),
            Some(Hierarchy::V2(_)) => None,
        }
    }

    /// Lifts the rules: the job's processes may open its GPUs again.
    pub fn give_back(self) -> io::Result<()> {
        match self {
            Withheld::Nothing => Ok(()),
            Withheld::V1 { dir, rules } => {
                for rule in &rules {
                    std::fs::write(dir.join("devices.allow"), rule).map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("cannot allow {rule} in {}: {e}", dir.display()),
                        )
                    })?;
                }
                Ok(())
            }
            Withheld::V2 { dir, prog } => crate::device_filter::detach(&dir, &prog),
        }
    }
}
