//! GPU series under dcgm-exporter's own names and labels (`gpu`, `UUID`, `device`, `modelName`,
//! `Hostname`), so dashboards built for it (Grafana 12239) work unchanged, plus `job` and
//! `user`: who holds the card (comma-joined when `--gpu-share` jobs share it; empty when free).
//!
//! Two deliberate differences, both for `promtool check metrics`: the cumulative ECC, energy and
//! retired-page series are typed `gauge` (dcgm-exporter types them `counter`, which promtool
//! flags for lacking a `_total` suffix; queries and `rate()` read them the same), and values NVML
//! does not give are left out instead of written as 0. The camelCase `modelName` label is kept:
//! promtool's lint names it, and the test accepts exactly that finding.

use crate::exposition::{Exposition, Kind};
use crate::sample::{GpuSample, NodeSample};

/// Who holds one GPU, for its labels.
#[derive(Debug, Clone, Default)]
pub struct Holder {
    /// Job ids, comma-joined.
    pub job: String,
    /// Their users, comma-joined.
    pub user: String,
}

type Read = fn(&GpuSample) -> Option<f64>;

/// dcgm-exporter's fields that labpool fills: name, help, and how to read it.
const FIELDS: &[(&str, &str, Read)] = &[
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", |g| {
        g.util.map(f64::from)
    }),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %).",
        |g| g.mem_util.map(f64::from),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        |g| g.fb_used_mib.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        |g| g.fb_free_mib.map(|v| v as f64),
    ),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", |g| {
        g.temp_c.map(f64::from)
    }),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", |g| {
        g.power_w
    }),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        |g| g.energy_mj.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "SM clock frequency (in MHz).",
        |g| g.sm_clock_mhz.map(f64::from),
    ),
    (
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "Throttling reasons, NVML's bit mask.",
        |g| g.throttle.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "Total number of single-bit volatile ECC errors.",
        |g| g.ecc.sbe_volatile.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "Total number of double-bit volatile ECC errors.",
        |g| g.ecc.dbe_volatile.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "Total number of single-bit persistent ECC errors.",
        |g| g.ecc.sbe_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "Total number of double-bit persistent ECC errors.",
        |g| g.ecc.dbe_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_RETIRED_SBE",
        "Total number of retired pages due to single-bit errors.",
        |g| g.retired_pages.map(|(s, _)| s as f64),
    ),
    (
        "DCGM_FI_DEV_RETIRED_DBE",
        "Total number of retired pages due to double-bit errors.",
        |g| g.retired_pages.map(|(_, d)| d as f64),
    ),
    (
        "DCGM_FI_DEV_XID_ERRORS",
        "Value of the last XID error encountered.",
        |g| g.xid.as_ref().map(|x| x.last as f64),
    ),
];

/// Every dcgm-exporter series name labpool exports, for dashboards and their tests.
pub fn series_names() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|(name, _, _)| *name)
}

/// Writes one node's sample. `holder(index)` names who holds each GPU.
pub fn write_node(
    page: &mut Exposition,
    hostname: &str,
    sample: &NodeSample,
    holder: impl Fn(u32) -> Holder,
) {
    for (name, help, _) in FIELDS {
        page.family(name, Kind::Gauge, help);
    }
    for gpu in &sample.gpus {
        let index = gpu.index.to_string();
        let device = format!("nvidia{}", gpu.minor.unwrap_or(gpu.index));
        let uuid = gpu.uuid.clone().unwrap_or_default();
        let h = holder(gpu.index);
        let labels = [
            ("gpu", index.as_str()),
            ("UUID", uuid.as_str()),
            ("device", device.as_str()),
            ("modelName", gpu.model.as_str()),
            ("Hostname", hostname),
            ("job", h.job.as_str()),
            ("user", h.user.as_str()),
        ];
        for (name, _, read) in FIELDS {
            if let Some(v) = read(gpu) {
                page.sample(name, &labels, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_values_are_left_out_and_labels_follow_dcgm_exporter() {
        let sample = NodeSample {
            at_ms: 0,
            gpus: vec![GpuSample {
                index: 1,
                uuid: Some("GPU-a".into()),
                model: "NVIDIA A100-SXM4-80GB".into(),
                minor: Some(3),
                util: Some(42),
                ..GpuSample::default()
            }],
            took_us: 0,
            jobs_memory: Vec::new(),
        };
        let mut page = Exposition::new();
        write_node(&mut page, "n1", &sample, |_| Holder {
            job: "12".into(),
            user: "alice".into(),
        });
        let text = page.finish();
        assert!(text.contains(
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-a\",device=\"nvidia3\",modelName=\"NVIDIA A100-SXM4-80GB\",Hostname=\"n1\",job=\"12\",user=\"alice\"} 42\n"
        ), "{text}");
        assert!(!text.contains("DCGM_FI_DEV_ECC"), "{text}");
    }
}
