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
//!   refuses the same devices (see [`crate::device_filter`]). `auto` prefers the v1
//!   controller where it is mounted (hybrid hosts), since its rules show in `devices.list`.
//! - Jobs and environment builds start through one [`Sandbox`]: into their groups, then as
//!   their user, between fork and exec.
//! - The shim itself leaves the cgroup of the daemon that started it
//!   ([`leave_service_cgroup`]), so that stopping the daemon's service never stops its jobs.
//! - When the job's memory group records an OOM kill, the job ends `OUT_OF_MEMORY` with the
//!   limit and the peak in the reason.

#![deny(missing_docs)]

mod cgroups;
pub mod device_filter;
mod job;
mod sandbox;
mod shim_cgroup;
mod support;
mod withhold;

pub use cgroups::{JobCgroups, memory_used, remove_groups};
pub use job::JobIsolation;
pub use sandbox::{Identity, Sandbox};
pub use shim_cgroup::leave_service_cgroup;
pub use support::{DeviceFilter, Hierarchy, NVIDIA_MAJOR, Support};
pub use withhold::{Withheld, group_pids, withhold};
