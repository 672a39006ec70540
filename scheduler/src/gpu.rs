//! GPU requests (`--gres=gpu:TYPE:N`, `--gpus TYPE:N`), slices of one GPU
//! (`--gres=gpu:TYPE.D:1`, `--gres=shard:N`) and GPU type names.

use crate::slice::{MAX_DENOMINATOR, Slice};
use serde::{Deserialize, Serialize};

/// How many GPUs a job asks for, and of which type.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GpuRequest {
    /// Number of GPUs; 0 for a CPU-only job.
    pub count: u32,
    /// A GPU type such as `rtx4090`, lower case; `None` takes any type.
    pub gpu_type: Option<String>,
    /// Part of one card rather than whole cards; `count` is then 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<Slice>,
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
    #[error("--gres '{0}': labpool schedules only the 'gpu' and 'shard' resources")]
    NotGpu(String),
    /// A slice asked for more than once, or with a bad denominator.
    #[error(
        "{flag} '{text}': a slice is one part of one card: write TYPE.D:1 with D from 2 to {MAX_DENOMINATOR} (e.g. --gres=gpu:rtx4090.4:1 for a quarter), or --gres=shard:N; for more, ask for whole GPUs"
    )]
    Slice {
        /// The flag.
        flag: &'static str,
        /// What was given.
        text: String,
    },
}

const GRES_FORMS: &str =
    "gpu:N, gpu:TYPE:N, gpu:TYPE, gpu:TYPE.D:1 or shard:N (e.g. --gres=gpu:rtx4090:2)";
const GPUS_FORMS: &str = "N, TYPE:N or TYPE.D:1 (e.g. --gpus 2 or --gpus a100:1)";

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
    if parts[0] == "shard" {
        let n = match &parts[1..] {
            [] => Some(1),
            [n] => parse_count(n),
            _ => None,
        };
        return match n {
            Some(0) => Err(GpuParseError::Zero {
                flag: "--gres",
                text: text.to_string(),
            }),
            Some(n) => Ok(GpuRequest {
                count: 1,
                gpu_type: None,
                slice: Some(Slice::Shards(n)),
            }),
            None => Err(malformed()),
        };
    }
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
            slice: None,
        },
        [one] if is_count(one) => GpuRequest {
            count: parse_count(one).ok_or_else(malformed)?,
            gpu_type: None,
            slice: None,
        },
        [ty] => GpuRequest {
            count: 1,
            gpu_type: Some(gpu_type(ty).ok_or_else(malformed)?),
            slice: None,
        },
        [ty, n] => GpuRequest {
            count: parse_count(n).ok_or_else(malformed)?,
            gpu_type: Some(gpu_type(ty).ok_or_else(malformed)?),
            slice: None,
        },
        _ => return Err(malformed()),
    };
    finish(req, "--gres", text)
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
            slice: None,
        },
        // A type alone is one GPU of it, as `--gres=gpu:a100` is.
        None => GpuRequest {
            count: 1,
            gpu_type: Some(gpu_type(t).ok_or_else(malformed)?),
            slice: None,
        },
        Some((ty, n)) => GpuRequest {
            count: parse_count(n).ok_or_else(malformed)?,
            gpu_type: Some(gpu_type(ty).ok_or_else(malformed)?),
            slice: None,
        },
    };
    finish(req, "--gpus", text)
}

/// Refuses zero GPUs, and reads a `TYPE.D` type as a slice of one card of `TYPE`.
fn finish(
    mut req: GpuRequest,
    flag: &'static str,
    text: &str,
) -> Result<GpuRequest, GpuParseError> {
    if req.count == 0 {
        return Err(GpuParseError::Zero {
            flag,
            text: text.to_string(),
        });
    }
    let typed = req.gpu_type.as_deref().and_then(|t| t.rsplit_once('.'));
    if let Some((ty, d)) = typed
        && is_count(d)
    {
        let bad = || GpuParseError::Slice {
            flag,
            text: text.to_string(),
        };
        let d: u32 = d.parse().map_err(|_| bad())?;
        if req.count != 1 || ty.is_empty() || !(2..=MAX_DENOMINATOR).contains(&d) {
            return Err(bad());
        }
        req.gpu_type = Some(ty.to_string());
        req.slice = Some(Slice::Fraction(d));
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
                gpu_type: None,
                slice: None
            }
        );
        assert_eq!(
            parse_gres("gpu:A100").unwrap(),
            GpuRequest {
                count: 1,
                gpu_type: Some("a100".into()),
                slice: None
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
                gpu_type: Some("v100".into()),
                slice: None
            }
        );
        assert!(matches!(parse_gpus("0"), Err(GpuParseError::Zero { .. })));
        // A type alone is one GPU of that type, as Slurm reads --gpus-per-node=a100.
        assert_eq!(
            parse_gpus("a100").unwrap(),
            GpuRequest {
                count: 1,
                gpu_type: Some("a100".into()),
                slice: None
            }
        );
        assert!(parse_gpus("two gpus").is_err());
        assert!(parse_gpus("a100:").is_err());
    }

    #[test]
    fn slices() {
        let q = parse_gres("gpu:RTX4090.4:1").unwrap();
        assert_eq!(
            (q.count, q.gpu_type.as_deref(), q.slice),
            (1, Some("rtx4090"), Some(Slice::Fraction(4)))
        );
        assert_eq!(
            parse_gres("gpu:l40s.2").unwrap().slice,
            Some(Slice::Fraction(2))
        );
        assert_eq!(
            parse_gpus("a6000.4:1").unwrap().slice,
            Some(Slice::Fraction(4))
        );
        let s = parse_gres("shard:3").unwrap();
        assert_eq!(
            (s.count, s.gpu_type, s.slice),
            (1, None, Some(Slice::Shards(3)))
        );
        assert_eq!(parse_gres("shard").unwrap().slice, Some(Slice::Shards(1)));
        for bad in [
            "gpu:rtx4090.4:2",
            "gpu:rtx4090.1:1",
            "gpu:rtx4090.17:1",
            "gpu:.4:1",
        ] {
            assert!(
                matches!(parse_gres(bad), Err(GpuParseError::Slice { .. })),
                "{bad}: {:?}",
                parse_gres(bad)
            );
        }
        assert!(matches!(
            parse_gres("shard:0"),
            Err(GpuParseError::Zero { .. })
        ));
        assert!(matches!(
            parse_gres("shard:x"),
            Err(GpuParseError::Malformed { .. })
        ));
        // A dot that is not followed by a number stays part of the type.
        assert_eq!(
            parse_gres("gpu:a100.x").unwrap().gpu_type.as_deref(),
            Some("a100.x")
        );
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
