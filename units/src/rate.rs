//! Rates: bytes per second written as a size (`200M`, `2G/s`), or bits per second as network
//! links are sold (`1Gbit`, decimal).

use crate::UnitError;
use crate::size::{format_size, parse_size};

/// Parses a rate into bytes per second. A size, with an optional `/s`, is bytes per second in
/// the size grammar (binary: `16M` is 16 MiB/s). A number with `bit`, `bit/s` or `bps` after
/// an optional `k`, `m`, `g` or `t` is bits per second in decimal units (`1Gbit` is 125 × 10^6
/// bytes per second).
///
/// ```
/// use labpool_units::parse_rate;
/// assert_eq!(parse_rate("1Gbit").unwrap(), 125e6);
/// assert_eq!(parse_rate("16M").unwrap(), 16.0 * 1048576.0);
/// assert_eq!(parse_rate("2GB/s").unwrap(), 2.0 * 1073741824.0);
/// ```
pub fn parse_rate(text: &str) -> Result<f64, UnitError> {
    let bad = || UnitError::Rate(text.to_string());
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let bits = ["bit/s", "bit", "bps"]
        .iter()
        .find_map(|s| lower.strip_suffix(s));
    let rate = match bits {
        Some(rest) => {
            let (number, scale) = match rest.chars().last() {
                Some('k') => (&rest[..rest.len() - 1], 1e3),
                Some('m') => (&rest[..rest.len() - 1], 1e6),
                Some('g') => (&rest[..rest.len() - 1], 1e9),
                Some('t') => (&rest[..rest.len() - 1], 1e12),
                _ => (rest, 1.0),
            };
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                return Err(bad());
            }
            number.parse::<f64>().map_err(|_| bad())? * scale / 8.0
        }
        None => {
            let size = t.strip_suffix("/s").unwrap_or(t);
            parse_size(size).map_err(|_| bad())? as f64
        }
    };
    if rate > 0.0 && rate.is_finite() {
        Ok(rate)
    } else {
        Err(bad())
    }
}

/// A rate in bytes per second, printed as a size per second: `16M/s`.
pub fn format_rate(bytes_per_sec: f64) -> String {
    format!("{}/s", format_size(bytes_per_sec.max(0.0).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10Gbit").unwrap(), 1.25e9);
        assert_eq!(parse_rate("100Mbps").unwrap(), 12.5e6);
        assert_eq!(parse_rate("8bit/s").unwrap(), 1.0);
        assert_eq!(parse_rate("1250M").unwrap(), 1250.0 * 1048576.0);
        assert_eq!(parse_rate("1.5G/s").unwrap(), 1.5 * 1073741824.0);
        for bad in ["", "0", "fast", "-1M", "Gbit", "1Xbit", "1 G"] {
            assert!(parse_rate(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format_rate(16.0 * 1048576.0), "16M/s");
    }
}
