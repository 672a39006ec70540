//! GPU requests (`--gres=gpu:TYPE:N`, `--gpus TYPE:N`) and GPU type names.

use serde::{Deserialize, Serialize};

/// How many GPUs a job asks for, and of which type.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GpuRequest {
    /// Number of GPUs; 0 for a CPU-only job.
    pub count: u32,
    /// A GPU type such as `rtx4090`, lower case; `None` takes any type.
    pub gpu_type: Option<String>,
}

/// Why a GPU request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuParseError {
    /// The text does not have the expected shape.
    #[error("invalid {flag} '{text}': write {example}")]
    Malformed {
        /// The flag, `--gres` or `--gpus`.
        flag: &'static str,
        /// What was given.
        text: String,
        /// The accepted forms.
        example: &'static str,
    },
    /// Zero GPUs requested explicitly.
    #[error("{flag} '{text}' asks for no GPU: leave the flag out for a CPU-only job")]
    Zero {
        /// The flag.
        flag: &'static str,
        /// What was given.
        text: String,
    },
    /// A generic resource other than GPUs.
    #[error("--gres '{0}': labpool schedules only the 'gpu' resource")]
    NotGpu(String),
}

const GRES_FORMS: &str = "gpu:N, gpu:TYPE:N or gpu:TYPE (e.g. --gres=gpu:rtx4090:2)";
const GPUS_FORMS: &str = "N or TYPE:N (e.g. --gpus 2 or --gpus a100:1)";

/// Parses Slurm's `--gres=gpu[:TYPE][:N]`.
///
/// ```
/// use labpool_scheduler::gpu::parse_gres;
/// let r = parse_gres("gpu:rtx4090:2").unwrap();
/// assert_eq!((r.count, r.gpu_type.as_deref()), (2, Some("rtx4090")));
/// assert_eq!(parse_gres("gpu").unwrap().count, 1);
/// ```
pub fn parse_gres(text: &str) -> Result<GpuRequest, GpuParseError> {
    let malformed = || GpuParseError::Malformed {
        flag: "--gres",
        text: text.to_string(),
        example: GRES_FORMS,
    };
    let t = text.trim();
    if t.contains(',') {
        // gpu is the only gres we manage; several entries can only mean something else.
        return Err(GpuParseError::NotGpu(text.to_string()));
    }
    let parts: Vec<&str> = t.split(':').collect();
    if parts[0] != "gpu" {
        return Err(if parts[0].is_empty() {
            malformed()
        } else {
            GpuParseError::NotGpu(text.to_string())
        });
    }
    let req = match &parts[1..] {
        [] => GpuRequest {
            count: 1,
            gpu_type: None,
        },
        [one] if is_count(one) => GpuRequest {
            count: parse_count(one).ok_or_else(malformed)?,
            gpu_type: None,
        },
        [ty] => GpuRequest {
            count: 1,
            gpu_type: Some(gpu_type(ty).ok_or_else(malformed)?),
        },
        [ty, n] => GpuRequest {
            count: parse_count(n).ok_or_else(malformed)?,
            gpu_type: Some(gpu_type(ty).ok_or_else(malformed)?),
        },
        _ => return Err(malformed()),
    };
    if req.count == 0 {
        return Err(GpuParseError::Zero {
            flag: "--gres",
            text: text.to_string(),
        });
    }
    Ok(req)
}

/// Parses Slurm's `--gpus N` or `--gpus TYPE:N`.
pub fn parse_gpus(text: &str) -> Result<GpuRequest, GpuParseError> {
    let malformed = || GpuParseError::Malformed {
        flag: "--gpus",
        text: text.to_string(),
        example: GPUS_FORMS,
    };
    let t = text.trim();
    let req = match t.split_once(':') {
        None if is_count(t) => GpuRequest {
            count: parse_count(t).ok_or_else(malformed)?,
            gpu_type: None,
        },
        // A type alone is one GPU of it, as `--gres=gpu:a100` is.
        None => GpuRequest {
            count: 1,
            gpu_type: Some(gpu_type(t).ok_or_else(malformed)?),
        },
        Some((ty, n)) => GpuRequest {
            count: parse_count(n).ok_or_else(malformed)?,
            gpu_type: Some(gpu_type(ty).ok_or_else(malformed)?),
        },
    };
    if req.count == 0 {
        return Err(GpuParseError::Zero {
            flag: "--gpus",
            text: text.to_string(),
        });
    }
    Ok(req)
}

fn is_count(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn parse_count(s: &str) -> Option<u32> {
    if is_count(s) { s.parse().ok() } else { None }
}

fn gpu_type(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    ok.then(|| s.to_ascii_lowercase())
}

/// Turns a product name as NVML reports it into the short type members write in `--gres`.
///
/// ```
/// use labpool_scheduler::gpu::short_gpu_type;
/// assert_eq!(short_gpu_type("NVIDIA GeForce RTX 4090"), "rtx4090");
/// assert_eq!(short_gpu_type("NVIDIA A100-SXM4-80GB"), "a100");
/// assert_eq!(short_gpu_type("NVIDIA H200"), "h200");
/// ```
pub fn short_gpu_type(product: &str) -> String {
    const VENDOR_WORDS: [&str; 4] = ["nvidia", "geforce", "tesla", "quadro"];
    const JOINED_PREFIXES: [&str; 3] = ["rtx", "gtx", "titan"];
    let lower = product.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split_whitespace()
        .filter(|w| !VENDOR_WORDS.contains(w))
        .collect();
    let mut name = match words.as_slice() {
        [] => return "gpu".to_string(),
        [first, second, ..] if JOINED_PREFIXES.contains(first) => format!("{first}{second}"),
        [first, ..] => first.to_string(),
    };
    // Form factor and memory size follow a dash: "a100-sxm4-80gb" is an a100.
    if let Some((model, _)) = name.split_once('-') {
        name = model.to_string();
    }
    name.retain(|c| c.is_ascii_alphanumeric());
    if name.is_empty() {
        "gpu".to_string()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_forms() {
        assert_eq!(
            parse_gres("gpu:2").unwrap(),
            GpuRequest {
                count: 2,
                gpu_type: None
            }
        );
        assert_eq!(
            parse_gres("gpu:A100").unwrap(),
            GpuRequest {
                count: 1,
                gpu_type: Some("a100".into())
            }
        );
        assert!(matches!(
            parse_gres("gpu:0"),
            Err(GpuParseError::Zero { .. })
        ));
        assert!(matches!(
            parse_gres("mps:100"),
            Err(GpuParseError::NotGpu(_))
        ));
        assert!(matches!(
            parse_gres("gpu:a100:2:3"),
            Err(GpuParseError::Malformed { .. })
        ));
        assert!(matches!(
            parse_gres("gpu:a100:x"),
            Err(GpuParseError::Malformed { .. })
        ));
    }

    #[test]
    fn gpus_forms() {
        assert_eq!(parse_gpus("4").unwrap().count, 4);
        assert_eq!(
            parse_gpus("v100:2").unwrap(),
            GpuRequest {
                count: 2,
                gpu_type: Some("v100".into())
            }
        );
        assert!(matches!(parse_gpus("0"), Err(GpuParseError::Zero { .. })));
        // A type alone is one GPU of that type, as Slurm reads --gpus-per-node=a100.
        assert_eq!(
            parse_gpus("a100").unwrap(),
            GpuRequest {
                count: 1,
                gpu_type: Some("a100".into())
            }
        );
        assert!(parse_gpus("two gpus").is_err());
        assert!(parse_gpus("a100:").is_err());
    }

    #[test]
    fn product_names() {
        assert_eq!(short_gpu_type("Tesla V100-SXM2-32GB"), "v100");
        assert_eq!(short_gpu_type("NVIDIA RTX A6000"), "rtxa6000");
        assert_eq!(short_gpu_type("NVIDIA H100 80GB HBM3"), "h100");
        assert_eq!(short_gpu_type("NVIDIA L40S"), "l40s");
        assert_eq!(short_gpu_type("NVIDIA GeForce GTX 1080 Ti"), "gtx1080");
        assert_eq!(short_gpu_type(""), "gpu");
    }
}
