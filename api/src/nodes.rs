//! Nodes, their GPUs and partitions as `labpool nodes`, `sinfo` and the dashboard show them,
//! and the request that drains a node.

use labpool_scheduler::node::NodeState;
use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}

/// One GPU of a node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpuView {
    /// Index.
    pub index: u32,
    /// Short type.
    pub gpu_type: String,
    /// Product name.
    pub product: String,
    /// Memory, MiB (0 when unknown).
    pub memory_mib: u64,
    /// UUID.
    pub uuid: Option<String>,
    /// Job holding it (the first, when it is shared).
    pub job: Option<u64>,
    /// Every job holding it: one, or up to `share` sharing jobs.
    #[serde(default)]
    pub jobs: Vec<u64>,
    /// How many `--gpu-share` jobs may hold it at once (1: not shared); for a sliced card, its
    /// shards.
    #[serde(default = "one")]
    pub share: u32,
    /// The slices it may be cut into, as denominators (`[2, 4]`); empty when it is not sliced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<u32>,
    /// The share units (shards of a sliced card) each job in `jobs` holds, in the same order;
    /// empty when it is held whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<u32>,
    /// The GPU it is linked to by NVLink, when it is one of a pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_peer: Option<u32>,
    /// Its latest utilisation, percent, where NVML samples it.
    #[serde(default)]
    pub util_percent: Option<u32>,
    /// Its latest temperature, degrees C, where NVML samples it.
    #[serde(default)]
    pub temperature_c: Option<u32>,
}

/// `POST /v1/nodes/drain`: drain a node, or resume it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrainRequest {
    /// The node.
    pub node: String,
    /// Why it drains; `None` resumes it.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A node, as `labpool nodes` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// State.
    pub state: NodeState,
    /// False while its agent is not responding (missed heartbeats, or orders that cannot be
    /// delivered): nothing new is placed there. Shown as `IDLE*`, as Slurm does.
    #[serde(default = "yes")]
    pub responding: bool,
    /// Why it is down, not responding or draining.
    pub reason: Option<String>,
    /// Where its GPUs come from: nvml, virtual or none.
    pub gpu_source: String,
    /// GPUs.
    pub gpus: Vec<GpuView>,
    /// GPUs free.
    pub gpus_free: u32,
    /// Cores.
    pub cpus: u32,
    /// Cores held by jobs.
    pub cpus_used: u32,
    /// Memory, MiB.
    pub mem_mib: u64,
    /// Memory held by jobs, MiB.
    pub mem_used_mib: u64,
    /// The job isolation it offers.
    #[serde(default)]
    pub isolation: String,
    /// How it checkpoints GPU state, when it can: its idle one-GPU sessions are suspended
    /// rather than stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Its agent's address, when the node is served by `labpool agent`.
    #[serde(default)]
    pub agent: Option<String>,
    /// The labpool version its agent runs: the controller's own for its in-process node;
    /// `None` for a remote node whose agent has not registered since the controller started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// When its agent was last heard from (RFC 3339).
    #[serde(default)]
    pub last_seen: Option<String>,
    /// Its 1-minute load average, from the last heartbeat.
    #[serde(default)]
    pub load: Option<f64>,
    /// Memory available on it, MiB, from the last heartbeat.
    #[serde(default)]
    pub mem_available_mib: Option<u64>,
    /// Its features, for `--constraint`.
    #[serde(default)]
    pub features: Vec<String>,
}

fn yes() -> bool {
    true
}

impl NodeView {
    /// The state as `labpool nodes` prints it: `IDLE`, or `IDLE*` while not responding.
    pub fn state_text(&self) -> String {
        let star = if self.responding { "" } else { "*" };
        format!("{}{star}", self.state.as_str())
    }
}

/// A partition, as `labpool partition list` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartitionView {
    /// Name.
    pub name: String,
    /// The default one.
    pub default: bool,
    /// Priority.
    pub priority: u32,
    /// Default time limit, seconds (`None`: unlimited).
    pub default_time_s: Option<u64>,
    /// Maximum time limit, seconds (`None`: unlimited).
    pub max_time_s: Option<u64>,
    /// Node names; empty means every node.
    pub nodes: Vec<String>,
    /// Accounts allowed; `None` means everyone.
    pub allow_accounts: Option<Vec<String>>,
    /// Most GPUs per job.
    pub max_gpus_per_job: Option<u32>,
    /// The slice a one-GPU job gets here unless it names a type or a slice (`4`: a quarter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_slice: Option<u32>,
}

impl GpuView {
    /// The part of a sliced card `job` holds (`1/4`); `None` when the card is not sliced or the
    /// job does not share it.
    pub fn part_of(&self, job: u64) -> Option<String> {
        if self.slices.is_empty() {
            return None;
        }
        let i = self.jobs.iter().position(|j| *j == job)?;
        Some(fraction(*self.units.get(i)?, self.share))
    }

    /// The part of a sliced card no job holds (`1/4`), when some is held and some is left.
    pub fn part_free(&self) -> Option<String> {
        let held: u32 = self.units.iter().sum();
        (!self.slices.is_empty() && held > 0 && held < self.share)
            .then(|| fraction(self.share - held, self.share))
    }

    /// Who holds it, as `labpool nodes` prints it: `free`, `job 12`, `jobs 12,13 (2/2 shares)`,
    /// or for a sliced card each job's part and what is left: `jobs 12 (1/4), 13 (1/2); 1/4 free`.
    pub fn used_by(&self) -> String {
        let holders: Vec<u64> = if self.jobs.is_empty() {
            self.job.into_iter().collect()
        } else {
            self.jobs.clone()
        };
        if !self.slices.is_empty() && !holders.is_empty() && self.units.len() == holders.len() {
            let parts: Vec<String> = holders
                .iter()
                .zip(&self.units)
                .map(|(j, u)| format!("{j} ({})", fraction(*u, self.share)))
                .collect();
            let held: u32 = self.units.iter().sum();
            let free = self.share.saturating_sub(held);
            let label = if holders.len() == 1 { "job" } else { "jobs" };
            let rest = if free == 0 {
                "full".to_string()
            } else {
                format!("{} free", fraction(free, self.share))
            };
            return format!("{label} {}; {rest}", parts.join(", "));
        }
        let mut user = match holders.as_slice() {
            [] => "free".to_string(),
            [j] => format!("job {j}"),
            many => format!(
                "jobs {}",
                many.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        if self.share > 1 && self.slices.is_empty() {
            user.push_str(&format!(" ({}/{} shares)", holders.len(), self.share));
        }
        if !self.slices.is_empty() && holders.is_empty() {
            let cuts: Vec<String> = self.slices.iter().map(|d| format!("1/{d}")).collect();
            user.push_str(&format!(" (sliced: {})", cuts.join(", ")));
        }
        user
    }
}

/// `units` of `of` as a reduced fraction: `1/4`, `1/2`, `3/4`, `1`.
pub fn fraction(units: u32, of: u32) -> String {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let g = gcd(units, of).max(1);
    match (units / g, of.max(1) / g) {
        (n, 1) => n.to_string(),
        (n, d) => format!("{n}/{d}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(jobs: Vec<u64>, units: Vec<u32>, slices: Vec<u32>, share: u32) -> GpuView {
        GpuView {
            index: 0,
            gpu_type: "rtx4090".into(),
            product: "NVIDIA GeForce RTX 4090".into(),
            memory_mib: 24564,
            uuid: None,
            job: jobs.first().copied(),
            jobs,
            share,
            slices,
            units,
            nvlink_peer: None,
            util_percent: None,
            temperature_c: None,
        }
    }

    #[test]
    fn who_holds_a_card_reads_as_parts_of_it() {
        assert_eq!(
            card(vec![12, 13], vec![1, 2], vec![2, 4], 4).used_by(),
            "jobs 12 (1/4), 13 (1/2); 1/4 free"
        );
        assert_eq!(
            card(vec![7], vec![4], vec![2, 4], 4).used_by(),
            "job 7 (1); full"
        );
        assert_eq!(
            card(vec![], vec![], vec![2, 4], 4).used_by(),
            "free (sliced: 1/2, 1/4)"
        );
        assert_eq!(
            card(vec![12, 13], vec![], vec![], 2).used_by(),
            "jobs 12,13 (2/2 shares)"
        );
        assert_eq!(card(vec![3], vec![], vec![], 1).used_by(), "job 3");
    }
}
