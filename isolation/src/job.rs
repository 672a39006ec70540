//! What the shim applies for one job: the devices it may not open and its memory limit.

use crate::Hierarchy;
use serde::{Deserialize, Serialize};

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
                "devices ({}; {} denied)",
                h.device_word(),
                labpool_units::count(self.denied.len() as u64, "other GPU")
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
