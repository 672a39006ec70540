//! Memory sizes as Slurm's `--mem` writes them.

/// Why a memory size was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid memory size '{0}': use a number of megabytes or a K/M/G/T suffix, e.g. --mem=32G")]
pub struct SizeParseError(pub String);

/// Parses `--mem`: a number with an optional K, M, G or T suffix (binary units, as Slurm),
/// megabytes when there is none. Returns MiB, rounded up.
///
/// ```
/// assert_eq!(labpool_scheduler::size::parse_mem_mib("32G").unwrap(), 32 * 1024);
/// assert_eq!(labpool_scheduler::size::parse_mem_mib("500").unwrap(), 500);
/// ```
pub fn parse_mem_mib(text: &str) -> Result<u64, SizeParseError> {
    let err = || SizeParseError(text.to_string());
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    if digits.is_empty() || digits.len() > 15 {
        return Err(err());
    }
    let n: u64 = digits.parse().map_err(|_| err())?;
    let scale: u64 = match unit.to_ascii_uppercase().trim_end_matches('B') {
        "K" => 1,
        "" | "M" => 1024,
        "G" => 1024 * 1024,
        "T" => 1024 * 1024 * 1024,
        _ => return Err(err()),
    };
    let kib = n.checked_mul(scale).ok_or_else(err)?;
    Ok(kib.div_ceil(1024))
}

/// Formats MiB for people: `512M`, `32G`, `1.5T`.
pub fn format_mib(mib: u64) -> String {
    if mib >= 1024 * 1024 {
        trim_unit(mib as f64 / (1024.0 * 1024.0), "T")
    } else if mib >= 1024 {
        trim_unit(mib as f64 / 1024.0, "G")
    } else {
        format!("{mib}M")
    }
}

/// Formats MiB so that [`parse_mem_mib`] reads back the same value: `32G`, or `24062M`.
///
/// ```
/// use labpool_scheduler::size::{format_mib_exact, parse_mem_mib};
/// assert_eq!(format_mib_exact(24_062), "24062M");
/// assert_eq!(parse_mem_mib(&format_mib_exact(32 * 1024)).unwrap(), 32 * 1024);
/// ```
pub fn format_mib_exact(mib: u64) -> String {
    if mib > 0 && mib.is_multiple_of(1024 * 1024) {
        format!("{}T", mib / (1024 * 1024))
    } else if mib > 0 && mib.is_multiple_of(1024) {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    }
}

fn trim_unit(v: f64, unit: &str) -> String {
    let s = format!("{v:.1}");
    format!("{}{unit}", s.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes() {
        assert_eq!(parse_mem_mib("1024K").unwrap(), 1);
        assert_eq!(parse_mem_mib("1M").unwrap(), 1);
        assert_eq!(parse_mem_mib("2g").unwrap(), 2048);
        assert_eq!(parse_mem_mib("1T").unwrap(), 1024 * 1024);
        assert_eq!(parse_mem_mib("1GB").unwrap(), 1024);
        for bad in ["", "G", "12X", "-1G", "1.5G", "99999999999999G"] {
            assert!(parse_mem_mib(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format_mib(512), "512M");
        assert_eq!(format_mib(32 * 1024), "32G");
        assert_eq!(format_mib(1536), "1.5G");
    }
}
