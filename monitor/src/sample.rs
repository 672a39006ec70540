//! One reading of a node's GPUs, as its agent took it from NVML. Values NVML does not give on a
//! card (ECC on consumer cards, say) are `None` and are left out of the metrics, never shown as 0.

use serde::{Deserialize, Serialize};

/// One reading of every GPU of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    /// When it was taken, ms since the epoch (the agent's clock).
    pub at_ms: i64,
    /// Each GPU, by index.
    pub gpus: Vec<GpuSample>,
    /// How long the reading took, µs: the sampling overhead.
    #[serde(default)]
    pub took_us: u64,
    /// The memory each running attempt's cgroup holds, where the node has memory isolation.
    #[serde(default)]
    pub jobs_memory: Vec<JobMemory>,
}

/// One attempt's memory on the node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobMemory {
    /// Job.
    pub job: u64,
    /// Attempt.
    pub attempt: u32,
    /// Bytes its cgroup holds.
    pub bytes: u64,
}

/// One GPU's reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// NVML index.
    pub index: u32,
    /// UUID.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Product name (`modelName` in dcgm-exporter's labels).
    #[serde(default)]
    pub model: String,
    /// Device minor (`nvidiaN`).
    #[serde(default)]
    pub minor: Option<u32>,
    /// GPU utilisation, percent.
    pub util: Option<u32>,
    /// Memory copy utilisation, percent.
    pub mem_util: Option<u32>,
    /// Framebuffer used, MiB.
    pub fb_used_mib: Option<u64>,
    /// Framebuffer free, MiB.
    pub fb_free_mib: Option<u64>,
    /// Temperature, °C.
    pub temp_c: Option<u32>,
    /// Power draw, W.
    pub power_w: Option<f64>,
    /// Energy since the driver loaded, mJ.
    pub energy_mj: Option<u64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Clock throttle reasons, NVML's bit mask.
    pub throttle: Option<u64>,
    /// ECC counts.
    #[serde(default)]
    pub ecc: Ecc,
    /// Retired pages: single-bit, double-bit.
    pub retired_pages: Option<(u64, u64)>,
    /// XID errors seen since the agent started, with the last one.
    #[serde(default)]
    pub xid: Option<Xid>,
    /// The processes on it.
    #[serde(default)]
    pub processes: Vec<GpuProcess>,
}

/// ECC error counts; `None` where the card has no ECC.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ecc {
    /// Volatile single-bit (since the driver loaded).
    pub sbe_volatile: Option<u64>,
    /// Volatile double-bit.
    pub dbe_volatile: Option<u64>,
    /// Aggregate single-bit (the card's life).
    pub sbe_aggregate: Option<u64>,
    /// Aggregate double-bit.
    pub dbe_aggregate: Option<u64>,
}

/// XID errors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Xid {
    /// How many.
    pub count: u64,
    /// The last one's code.
    pub last: u64,
}

/// A process on a GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Its pid, in the node's pid namespace.
    pub pid: u32,
    /// GPU memory it holds, MiB.
    pub used_mib: u64,
    /// Its share of the SM, percent, where NVML gives per-process samples.
    #[serde(default)]
    pub sm_util: Option<u32>,
    /// The labpool job it belongs to, found through its cgroup or environment.
    pub job: Option<u64>,
}

impl GpuSample {
    /// The jobs with a process on this GPU, ascending, each once.
    pub fn jobs(&self) -> Vec<u64> {
        let mut jobs: Vec<u64> = self.processes.iter().filter_map(|p| p.job).collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }
}
