//! What this machine has: GPUs from NVML (or configured virtual ones), cores and memory.
//!
//! NVML is loaded at run time, so the binary runs on machines without a driver. Any failure to
//! load or initialise it means "no NVML here": the node then has the virtual GPUs its config
//! switches on, or none, and the reason is kept so that `init` and `serve` can say it.

use crate::env_vars;
use labpool_scheduler::gpu::short_gpu_type;
use labpool_scheduler::node::{GpuDevice, NodeSpec};
use labpool_settings::{NodeConfig, VirtualGpus};
use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, P2pStatus};
use std::path::{Path, PathBuf};

/// Where a node's GPUs came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSource {
    /// Found by NVML.
    Nvml,
    /// Configured `virtual_gpus`.
    Virtual,
    /// Neither: the reason NVML gave.
    None(String),
}

impl GpuSource {
    /// A short word for listings.
    pub fn as_str(&self) -> &'static str {
        match self {
            GpuSource::Nvml => "nvml",
            GpuSource::Virtual => "virtual",
            GpuSource::None(_) => "none",
        }
    }
}

/// The GPUs found, and how.
#[derive(Debug, Clone)]
pub struct GpuDiscovery {
    /// The GPUs, by index.
    pub gpus: Vec<GpuDevice>,
    /// Where they came from.
    pub source: GpuSource,
}

/// Which NVML library to load: the config's, else `$LABPOOL_NVML_LIBRARY`, else the system's.
pub fn nvml_library(config: Option<&Path>) -> Option<PathBuf> {
    config
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(env_vars::LABPOOL_NVML_LIBRARY).map(PathBuf::from))
}

/// Loads NVML from `library`, or the system's.
pub fn load_nvml(
    library: Option<&Path>,
) -> Result<nvml_wrapper::Nvml, nvml_wrapper::error::NvmlError> {
    match library {
        Some(lib) => nvml_wrapper::Nvml::builder()
            .lib_path(lib.as_os_str())
            .init(),
        None => nvml_wrapper::Nvml::init(),
    }
}

/// The NVIDIA driver's version as NVML reports it (`570.86.15`); `None` without NVML.
pub fn nvml_driver_version(library: Option<&Path>) -> Option<String> {
    load_nvml(library).ok()?.sys_driver_version().ok()
}

/// Asks NVML for this machine's GPUs.
pub fn nvml_gpus(library: Option<&Path>) -> Result<Vec<GpuDevice>, String> {
    let nvml = load_nvml(library).map_err(|e| format!("NVML did not load ({e})"))?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML device count failed: {e}"))?;
    let mut gpus = (0..count)
        .map(|index| {
            let dev = nvml
                .device_by_index(index)
                .map_err(|e| format!("NVML device {index}: {e}"))?;
            let product = dev
                .name()
                .map_err(|e| format!("NVML device {index} name: {e}"))?;
            Ok(GpuDevice {
                index,
                gpu_type: short_gpu_type(&product),
                memory_mib: dev
                    .memory_info()
                    .map(|m| m.total / (1024 * 1024))
                    .unwrap_or(0),
                uuid: dev.uuid().ok(),
                product,
                share: 1,
                slices: Vec::new(),
                nvlink_peer: None,
            })
        })
        .collect::<Result<Vec<GpuDevice>, String>>()?;
    let linked = |a: u32, b: u32| {
        let (Ok(da), Ok(db)) = (nvml.device_by_index(a), nvml.device_by_index(b)) else {
            return false;
        };
        matches!(
            da.p2p_status(&db, P2pCapabilitiesIndex::NvLink),
            Ok(P2pStatus::Ok)
        )
    };
    set_pairs(&mut gpus, linked);
    Ok(gpus)
}

/// Marks GPUs linked to exactly one other GPU (`linked(a, b)`) as that one's pair; a GPU linked
/// to several (an NVSwitch box) has no partner.
pub fn set_pairs(gpus: &mut [GpuDevice], linked: impl Fn(u32, u32) -> bool) {
    let indexes: Vec<u32> = gpus.iter().map(|g| g.index).collect();
    for g in gpus.iter_mut() {
        let peers: Vec<u32> = indexes
            .iter()
            .copied()
            .filter(|o| *o != g.index && linked(g.index, *o))
            .collect();
        g.nvlink_peer = match peers.as_slice() {
            [one] => Some(*one),
            _ => None,
        };
    }
    // A pair is mutual: a GPU whose peer has other peers is not in a pair.
    let peer_of: std::collections::BTreeMap<u32, Option<u32>> =
        gpus.iter().map(|g| (g.index, g.nvlink_peer)).collect();
    for g in gpus.iter_mut() {
        if let Some(p) = g.nvlink_peer
            && peer_of.get(&p).copied().flatten() != Some(g.index)
        {
            g.nvlink_peer = None;
        }
    }
}

/// Each GPU's device minor (`/dev/nvidiaN` is `195:N`), by index: NVML's answer, or the index
/// for virtual GPUs (which is how tests map them to fake device nodes).
pub fn gpu_minors(
    config: &NodeConfig,
    source: &GpuSource,
    gpus: &[GpuDevice],
) -> std::collections::BTreeMap<u32, u32> {
    let mut out: std::collections::BTreeMap<u32, u32> =
        gpus.iter().map(|g| (g.index, g.index)).collect();
    if *source == GpuSource::Nvml
        && let Ok(nvml) = load_nvml(nvml_library(config.nvml_library.as_deref()).as_deref())
    {
        for g in gpus {
            if let Ok(minor) = nvml.device_by_index(g.index).and_then(|d| d.minor_number()) {
                out.insert(g.index, minor);
            }
        }
    }
    out
}

/// The node's GPUs: configured virtual ones win; otherwise NVML's.
pub fn discover_gpus(config: &NodeConfig) -> GpuDiscovery {
    if let Some(v) = &config.virtual_gpus {
        return GpuDiscovery {
            gpus: virtual_gpus(v),
            source: GpuSource::Virtual,
        };
    }
    match nvml_gpus(nvml_library(config.nvml_library.as_deref()).as_deref()) {
        Ok(gpus) if !gpus.is_empty() => GpuDiscovery {
            gpus,
            source: GpuSource::Nvml,
        },
        Ok(_) => GpuDiscovery {
            gpus: Vec::new(),
            source: GpuSource::None("NVML reports 0 GPUs".to_string()),
        },
        Err(why) => GpuDiscovery {
            gpus: Vec::new(),
            source: GpuSource::None(why),
        },
    }
}

/// `count` GPUs of one type, numbered from 0.
pub fn virtual_gpus(v: &VirtualGpus) -> Vec<GpuDevice> {
    (0..v.count)
        .map(|index| GpuDevice {
            index,
            gpu_type: v.gpu_type.clone(),
            product: "virtual".to_string(),
            memory_mib: v.memory_mib,
            uuid: None,
            share: 1,
            slices: Vec::new(),
            nvlink_peer: None,
        })
        .collect()
}

/// Cores this process may use.
pub fn host_cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// Total memory in MiB, from `/proc/meminfo`.
pub fn host_mem_mib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib / 1024)
        })
        .unwrap_or(0)
}

/// This host's name.
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .map(|h| h.split('.').next().unwrap_or_default().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The node as the config and the hardware describe it.
pub fn node_spec(config: &NodeConfig) -> (NodeSpec, GpuSource) {
    let found = discover_gpus(config);
    let mut gpus = found.gpus;
    if let Some(share) = &config.gpu_share {
        for g in &mut gpus {
            g.share = share.of(&g.gpu_type);
        }
    }
    if let Some(pairs) = &config.nvlink_pairs {
        let linked = |a: u32, b: u32| pairs.iter().any(|p| *p == [a, b] || *p == [b, a]);
        set_pairs(&mut gpus, linked);
    }
    if let Some(slices) = &config.slices {
        for g in &mut gpus {
            let cut = slices.of(&g.gpu_type);
            if let Some(shards) = labpool_scheduler::slice::shards_of(&cut)
                && shards > 1
            {
                g.share = shards;
                g.slices = cut;
            }
        }
    }
    let spec = NodeSpec {
        name: config.name.clone().unwrap_or_else(host_name),
        gpus,
        cpus: config.cpus.unwrap_or_else(host_cpus),
        mem_mib: config.memory.unwrap_or_else(host_mem_mib),
        features: config.features.clone(),
    };
    (spec, found.source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliced_cards_carry_their_shards_and_memory() {
        let config = NodeConfig {
            virtual_gpus: Some(VirtualGpus::parse("2:rtx4090:24G").unwrap()),
            slices: Some(labpool_settings::GpuSlices::ByType(
                [("rtx4090".to_string(), vec![4, 2])].into(),
            )),
            ..NodeConfig::default()
        };
        let (spec, _) = node_spec(&config);
        for g in &spec.gpus {
            assert_eq!(
                (g.slices.as_slice(), g.share, g.memory_mib),
                (&[2, 4][..], 4, 24 * 1024)
            );
        }
        let plain = NodeConfig {
            slices: None,
            ..config
        };
        assert!(
            node_spec(&plain)
                .0
                .gpus
                .iter()
                .all(|g| g.slices.is_empty() && g.share == 1)
        );
    }
}

#[cfg(test)]
mod pair_tests {
    use super::*;

    fn gpus(n: u32) -> Vec<GpuDevice> {
        virtual_gpus(&VirtualGpus::parse(&format!("{n}:a6000")).unwrap())
    }

    #[test]
    fn pairs_are_mutual_and_an_nvswitch_box_has_none() {
        let mut g = gpus(4);
        set_pairs(&mut g, |a, b| a / 2 == b / 2);
        let peers: Vec<Option<u32>> = g.iter().map(|d| d.nvlink_peer).collect();
        assert_eq!(peers, [Some(1), Some(0), Some(3), Some(2)]);
        let mut g = gpus(4);
        set_pairs(&mut g, |_, _| true);
        assert!(g.iter().all(|d| d.nvlink_peer.is_none()));
        // 0-1 and 1-2 linked: 1 has two peers, so 0 and 2 are not in a pair with it either.
        let mut g = gpus(3);
        set_pairs(&mut g, |a, b| a.abs_diff(b) == 1);
        assert!(g.iter().all(|d| d.nvlink_peer.is_none()));
    }
}
