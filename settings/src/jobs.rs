//! `[jobs]`: the rules every job's environment follows.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a job script may do with `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OverridePolicy {
    /// A script that sets it is refused at submit.
    #[default]
    Refuse,
    /// It is accepted, with a warning.
    Warn,
}

/// Whether jobs are put in cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum IsolationMode {
    /// Device and memory isolation wherever the node's kernel offers it.
    #[default]
    Auto,
    /// None (jobs see every GPU device node; `--mem` is only a reservation).
    Off,
}

/// `[jobs]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    /// "refuse" (default) or "warn": a script that sets `CUDA_VISIBLE_DEVICES`.
    pub cuda_visible_devices: OverridePolicy,
    /// "auto" (default) or "off": cgroup device and memory isolation.
    pub isolation: IsolationMode,
    /// How devices are filtered: "auto" (the v1 devices controller where mounted, else a BPF
    /// filter on cgroup v2), "cgroup-v1" or "bpf".
    pub device_filter: labpool_isolation::DeviceFilter,
    /// Variables every job gets unless its own environment sets them. Keys here replace the
    /// built-in defaults (memory growth, async allocator, PCI bus order); an empty value drops
    /// a default.
    pub gpu_env: BTreeMap<String, String>,
    /// An interactive session (`labpool run --pty`) that gets no input, and whose GPUs stay
    /// under `idle_gpu_percent`, for this long is told, then stopped after `idle_grace`, and its
    /// GPUs go back to the pool (a partition may set its own `idle_after`). Its host also ends it
    /// after this long without input where it cannot reach the controller.
    #[serde(
        deserialize_with = "super::values::de_duration",
        serialize_with = "super::values::ser_duration"
    )]
    pub interactive_idle: std::time::Duration,
    /// The TCP ports leased to jobs, `FIRST-LAST`: each running job gets a block of them, the
    /// same on all of its nodes (`MASTER_PORT`, its steps' launcher, one per task), never
    /// leased to another job at the same time. Keep other services out of this range.
    pub ports: String,
    /// A sliced job whose processes hold more of their card than the slice (the slice library
    /// escaped) is warned at once and killed when it is still over after this long.
    #[serde(
        deserialize_with = "super::values::de_duration",
        serialize_with = "super::values::ser_duration"
    )]
    pub slice_grace: std::time::Duration,
    /// A session's GPU at or over this utilisation, percent, is computing: the session is not
    /// idle, typed into or not (a partition may set its own).
    pub idle_gpu_percent: f64,
    /// How long an idle session has, once told, before it is stopped (a partition may set its
    /// own).
    #[serde(
        deserialize_with = "super::values::de_duration",
        serialize_with = "super::values::ser_duration"
    )]
    pub idle_grace: std::time::Duration,
    /// An idle one-GPU session is suspended rather than stopped, on a node that can: its GPU
    /// state is checkpointed to host memory with NVIDIA's `cuda-checkpoint` (driver 550 or
    /// later), its GPU goes back to the pool, and it is restored when its member comes back.
    pub suspend_idle: bool,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            cuda_visible_devices: OverridePolicy::Refuse,
            isolation: IsolationMode::Auto,
            device_filter: labpool_isolation::DeviceFilter::Auto,
            gpu_env: BTreeMap::new(),
            interactive_idle: std::time::Duration::from_secs(3600),
            ports: "20000-29999".to_string(),
            slice_grace: std::time::Duration::from_secs(30),
            idle_gpu_percent: 5.0,
            idle_grace: std::time::Duration::from_secs(600),
            suspend_idle: true,
        }
    }
}

impl JobsConfig {
    /// The hygiene variables: the built-in defaults with the config's changes.
    pub fn gpu_env(&self) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = labpool_envs::hygiene::GPU_DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (k, v) in &self.gpu_env {
            if v.is_empty() {
                env.remove(k);
            } else {
                env.insert(k.clone(), v.clone());
            }
        }
        env
    }

    /// `ports` as (first, last).
    pub fn port_range(&self) -> Result<(u16, u16), String> {
        let bad = || {
            format!(
                "[jobs] ports = {:?}: write FIRST-LAST, such as \"20000-29999\", with 1024 <= FIRST < LAST <= 65535",
                self.ports
            )
        };
        let (a, b) = self.ports.split_once('-').ok_or_else(bad)?;
        let (a, b): (u16, u16) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a < 1024 || a >= b {
            return Err(bad());
        }
        Ok((a, b))
    }

    /// `gpu_env` does not touch `CUDA_VISIBLE_DEVICES` and its keys are variable names; `ports`
    /// is a range.
    pub(super) fn check(&self) -> Result<(), String> {
        self.port_range()?;
        super::partitions::check_idle(
            "[jobs]",
            Some(self.idle_gpu_percent),
            Some(self.idle_grace),
        )?;
        for k in self.gpu_env.keys() {
            if k == "CUDA_VISIBLE_DEVICES" || k.is_empty() || k.contains('=') {
                return Err(format!(
                    "[jobs] gpu_env: {k:?} cannot be set here (labpool sets CUDA_VISIBLE_DEVICES to each job's GPUs)"
                ));
            }
        }
        Ok(())
    }
}
