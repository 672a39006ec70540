//! `[node]`: this machine as the in-process agent reports it, and virtual GPUs.

use super::rebase;
use super::values::de_opt_mem;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `[node]`: this machine as the in-process agent reports it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Node name [default: the host name].
    pub name: Option<String>,
    /// Job spool: one directory per running job [default: STATE_DIR/spool].
    pub spool_dir: Option<PathBuf>,
    /// CPU cores the pool may use [default: all].
    pub cpus: Option<u32>,
    /// Memory the pool may use, e.g. "60G" [default: all].
    #[serde(default, deserialize_with = "de_opt_mem")]
    pub memory: Option<u64>,
    /// Virtual GPUs, "N" or "N:TYPE": used instead of NVML, for CPU-only boxes and tests.
    #[serde(default, deserialize_with = "de_opt_virtual_gpus")]
    pub virtual_gpus: Option<VirtualGpus>,
    /// Where to load NVML from [default: the system's libnvidia-ml.so.1].
    pub nvml_library: Option<PathBuf>,
    /// How many `--gpu-share` jobs may hold one GPU at once: a number for every GPU of the
    /// node, or a table by GPU type (`{ rtx3090 = 2 }`) [default: 1, no sharing].
    #[serde(default)]
    pub gpu_share: Option<GpuShare>,
    /// Features of this node that jobs may ask for with `--constraint` (e.g. `["a100", "ib"]`).
    #[serde(default)]
    pub features: Vec<String>,
}

impl NodeConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        if let Some(p) = self.spool_dir.as_mut() {
            rebase(base, p);
        }
    }

    /// `gpu_share` is 1 to 8.
    pub(super) fn check_gpu_share(&self) -> Result<(), String> {
        if let Some(share) = &self.gpu_share {
            let bad = match share {
                GpuShare::All(n) => !(1..=8).contains(n),
                GpuShare::ByType(m) => m.values().any(|n| !(1..=8).contains(n)),
            };
            if bad {
                return Err(
                    "[node] gpu_share: give 1 to 8 jobs per GPU (1 means no sharing), e.g. gpu_share = 2 or gpu_share = { rtx3090 = 2 }".to_string(),
                );
            }
        }
        Ok(())
    }

    /// `name` is a word of letters, digits, '-', '_' and '.'.
    pub(super) fn check_name(&self) -> Result<(), String> {
        if let Some(name) = &self.name
            && (name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'))
        {
            return Err(format!(
                "[node] name {name:?}: use letters, digits, '-', '_' and '.'"
            ));
        }
        Ok(())
    }

    /// Each feature is a word `--constraint` can name.
    pub(super) fn check_features(&self) -> Result<(), String> {
        let bad: Vec<&str> = self
            .features
            .iter()
            .filter(|f| {
                f.is_empty()
                    || !f.chars().all(|c| {
                        c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '+' | '=')
                    })
            })
            .map(String::as_str)
            .collect();
        if bad.is_empty() {
            return Ok(());
        }
        Err(format!(
            "[node] features {bad:?}: a feature is a word of letters, digits, '_', '-', '.', ':', '+' or '=', e.g. features = [\"a100\", \"ib\"]"
        ))
    }

    /// `cpus` is not 0.
    pub(super) fn check_cpus(&self) -> Result<(), String> {
        if self.cpus == Some(0) {
            return Err(
                "[node] cpus = 0: give at least 1, or leave it out to use every core".to_string(),
            );
        }
        Ok(())
    }
}

/// `gpu_share = 2` or `gpu_share = { rtx3090 = 2, a100 = 1 }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum GpuShare {
    /// The same for every GPU.
    All(u32),
    /// By GPU type; types not named are not shared.
    ByType(BTreeMap<String, u32>),
}

impl GpuShare {
    /// The share of a GPU of `gpu_type`.
    pub fn of(&self, gpu_type: &str) -> u32 {
        match self {
            GpuShare::All(n) => *n,
            GpuShare::ByType(m) => m.get(gpu_type).copied().unwrap_or(1),
        }
    }
}

/// `virtual_gpus = "4:rtx4090"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VirtualGpus {
    /// How many.
    pub count: u32,
    /// Their type.
    pub gpu_type: String,
}

impl VirtualGpus {
    /// Parses `N` or `N:TYPE`.
    pub fn parse(text: &str) -> Result<VirtualGpus, String> {
        let (n, ty) = text.split_once(':').unwrap_or((text, "virtual"));
        let count: u32 = n.trim().parse().map_err(|_| {
            format!("invalid virtual GPUs '{text}': write N or N:TYPE, e.g. 4:rtx4090")
        })?;
        let ok = !ty.is_empty()
            && ty
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok || count == 0 || count > 64 {
            return Err(format!(
                "invalid virtual GPUs '{text}': write N or N:TYPE with 1 to 64 GPUs, e.g. 4:rtx4090"
            ));
        }
        Ok(VirtualGpus {
            count,
            gpu_type: ty.to_ascii_lowercase(),
        })
    }
}

fn de_opt_virtual_gpus<'de, D: Deserializer<'de>>(d: D) -> Result<Option<VirtualGpus>, D::Error> {
    let s = String::deserialize(d)?;
    VirtualGpus::parse(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}
