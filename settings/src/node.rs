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
    /// Cards that may be cut into slices, each slice with its share of the card's memory: the
    /// denominators for every GPU (`[2, 4]`: halves and quarters), or a table by GPU type
    /// (`{ rtx4090 = [2, 4] }`) [default: none]. Members ask with `--gres=gpu:rtx4090.4:1`
    /// or `--gres=shard:N`.
    #[serde(default)]
    pub slices: Option<GpuSlices>,
    /// GPUs linked in pairs by NVLink bridges, by index (`[[0, 1], [2, 3]]`), where NVML does
    /// not tell (virtual GPUs, or to override it) [default: as NVML reports]. One-GPU jobs and
    /// slices fill a pair before they break another.
    #[serde(default)]
    pub nvlink_pairs: Option<Vec<[u32; 2]>>,
    /// Features of this node that jobs may ask for with `--constraint` (e.g. `["a100", "ib"]`).
    #[serde(default)]
    pub features: Vec<String>,
    /// NVIDIA's `cuda-checkpoint`, which suspends idle sessions (`[jobs] suspend_idle`)
    /// [default: `cuda-checkpoint` on the agent's PATH].
    pub cuda_checkpoint: Option<PathBuf>,
}

impl NodeConfig {
    /// Makes its paths absolute, relative to `base`, the config file's directory.
    pub(super) fn rebase(&mut self, base: &Path) {
        if let Some(p) = self.spool_dir.as_mut() {
            rebase(base, p);
        }
        if let Some(p) = self.cuda_checkpoint.as_mut() {
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

    /// Every slice list cuts a card into at most 64 shards, with denominators from 2 to 16; a
    /// GPU type is either shared (`gpu_share`) or sliced, not both.
    pub(super) fn check_slices(&self) -> Result<(), String> {
        use labpool_scheduler::slice::{MAX_DENOMINATOR, MAX_SHARDS, shards_of};
        let Some(slices) = &self.slices else {
            return Ok(());
        };
        let lists: Vec<(String, &Vec<u32>)> = match slices {
            GpuSlices::All(v) => vec![("every GPU".to_string(), v)],
            GpuSlices::ByType(m) => m.iter().map(|(t, v)| (t.clone(), v)).collect(),
        };
        let mut problems = Vec::new();
        for (what, list) in &lists {
            if list.is_empty() || shards_of(list).is_none() {
                problems.push(format!(
                    "{what}: {list:?} (each slice is 2 to {MAX_DENOMINATOR}, and their least common multiple at most {MAX_SHARDS})"
                ));
            }
        }
        if let Some(share) = &self.gpu_share {
            for (what, _) in &lists {
                let shared = match (share, slices) {
                    (GpuShare::All(n), _) => *n > 1,
                    (GpuShare::ByType(m), GpuSlices::ByType(_)) => {
                        m.get(what).is_some_and(|n| *n > 1)
                    }
                    (GpuShare::ByType(m), GpuSlices::All(_)) => m.values().any(|n| *n > 1),
                };
                if shared {
                    problems.push(format!(
                        "{what} is both shared (gpu_share) and sliced; slices are shared with metered memory, so drop it from gpu_share"
                    ));
                }
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(format!(
            "[node] slices: {}; e.g. slices = {{ rtx4090 = [2, 4] }}",
            problems.join("; ")
        ))
    }

    /// Each GPU is in at most one pair, never with itself.
    pub(super) fn check_nvlink_pairs(&self) -> Result<(), String> {
        let Some(pairs) = &self.nvlink_pairs else {
            return Ok(());
        };
        let mut seen = std::collections::BTreeSet::new();
        let bad: Vec<String> = pairs
            .iter()
            .filter(|[a, b]| a == b || !seen.insert(*a) || !seen.insert(*b))
            .map(|[a, b]| format!("[{a}, {b}]"))
            .collect();
        if bad.is_empty() {
            return Ok(());
        }
        Err(format!(
            "[node] nvlink_pairs: {} (each GPU is in at most one pair, with another GPU), e.g. nvlink_pairs = [[0, 1], [2, 3]]",
            bad.join(", ")
        ))
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

/// `slices = [2, 4]` or `slices = { rtx4090 = [2, 4], l40s = [2] }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum GpuSlices {
    /// The same for every GPU.
    All(Vec<u32>),
    /// By GPU type; types not named are not sliced.
    ByType(BTreeMap<String, Vec<u32>>),
}

impl GpuSlices {
    /// The slices a GPU of `gpu_type` may be cut into; empty when it is not sliced.
    pub fn of(&self, gpu_type: &str) -> Vec<u32> {
        let mut v = match self {
            GpuSlices::All(v) => v.clone(),
            GpuSlices::ByType(m) => m.get(gpu_type).cloned().unwrap_or_default(),
        };
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// `virtual_gpus = "4:rtx4090"`, or `"4:rtx4090:24G"` with each card's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VirtualGpus {
    /// How many.
    pub count: u32,
    /// Their type.
    pub gpu_type: String,
    /// Each one's memory, MiB; 0 when not given (slices of it are then not metered).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_mib: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl VirtualGpus {
    /// Parses `N`, `N:TYPE` or `N:TYPE:MEMORY`.
    pub fn parse(text: &str) -> Result<VirtualGpus, String> {
        let mut fields = text.splitn(3, ':');
        let n = fields.next().unwrap_or_default();
        let ty = fields.next().unwrap_or("virtual");
        let mem = fields.next();
        let bad = || {
            format!(
                "invalid virtual GPUs '{text}': write N, N:TYPE or N:TYPE:MEMORY with 1 to 64 GPUs, e.g. 4:rtx4090 or 4:rtx4090:24G"
            )
        };
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        let ok = !ty.is_empty()
            && ty
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok || count == 0 || count > 64 {
            return Err(bad());
        }
        let memory_mib = match mem {
            Some(m) => labpool_units::parse_mem_mib(m).map_err(|_| bad())?,
            None => 0,
        };
        Ok(VirtualGpus {
            count,
            gpu_type: ty.to_ascii_lowercase(),
            memory_mib,
        })
    }
}

fn de_opt_virtual_gpus<'de, D: Deserializer<'de>>(d: D) -> Result<Option<VirtualGpus>, D::Error> {
    let s = String::deserialize(d)?;
    VirtualGpus::parse(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}
