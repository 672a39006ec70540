//! Byte sizes: `500G`, `1.5T`, `4096`, `2GiB`; and memory as Slurm's `--mem` writes it.

use crate::UnitError;

/// The units, each a power of 1024.
const UNITS: [(char, u32); 5] = [('K', 10), ('M', 20), ('G', 30), ('T', 40), ('P', 50)];

/// Splits `1.5GiB` into `("1.5", Some(30))`; `None` when there is no unit letter. A trailing
/// `B` or `iB` is dropped; `None` for an unknown unit.
fn split_unit(text: &str) -> Option<(&str, Option<u32>)> {
    let t = text
        .strip_suffix("iB")
        .or_else(|| text.strip_suffix("ib"))
        .or_else(|| text.strip_suffix("IB"))
        .or_else(|| text.strip_suffix(['B', 'b']))
        .unwrap_or(text);
    match t.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => {
            let upper = c.to_ascii_uppercase();
            let (_, shift) = UNITS.iter().find(|(u, _)| *u == upper)?;
            Some((&t[..t.len() - 1], Some(*shift)))
        }
        _ => Some((t, None)),
    }
}

/// Parses a size in bytes: digits with at most one decimal point, then an optional unit (`K`,
/// `M`, `G`, `T`, `P`, binary, either case) and an optional `B` or `iB`. `1.5G` is 1.5 × 2^30.
/// Negative numbers, exponents, spaces inside, unknown units and overflows are refused.
///
/// ```
/// use labpool_units::parse_size;
/// assert_eq!(parse_size("50G").unwrap(), 50 << 30);
/// assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
/// assert_eq!(parse_size("4096").unwrap(), 4096);
/// assert!(parse_size("5 G").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Size(text.to_string());
    let (number, shift) = split_unit(text.trim()).ok_or_else(bad)?;
    let dots = number.bytes().filter(|b| *b == b'.').count();
    if number.is_empty()
        || number == "."
        || dots > 1
        || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return Err(bad());
    }
    let shift = shift.unwrap_or(0);
    if dots == 0 {
        let n: u64 = number.parse().map_err(|_| bad())?;
        return n.checked_mul(1u64 << shift).ok_or_else(bad);
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

/// Parses Slurm's `--mem`: a whole number with an optional `K`, `M`, `G` or `T` (binary, with
/// an optional `B`), megabytes when there is none. Returns MiB, rounded up.
///
/// ```
/// use labpool_units::parse_mem_mib;
/// assert_eq!(parse_mem_mib("32G").unwrap(), 32 * 1024);
/// assert_eq!(parse_mem_mib("500").unwrap(), 500);
/// assert!(parse_mem_mib("1.5G").is_err());
/// ```
pub fn parse_mem_mib(text: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Memory(text.to_string());
    let (digits, shift) = split_unit(text.trim()).ok_or_else(bad)?;
    if digits.is_empty() || digits.len() > 15 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let shift = shift.unwrap_or(20);
    if shift > 40 {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let kib = n.checked_mul(1u64 << (shift - 10)).ok_or_else(bad)?;
    Ok(kib.div_ceil(1024))
}

/// The one way labpool prints a size: below 1024 the bare number of bytes, else the largest
/// binary unit with one decimal below 10 (`1.5G`, `4K`: a `.0` is dropped) and none from 10
/// up (`64M`, `12G`). [`parse_size`] reads it back to within that rounding.
///
/// ```
/// use labpool_units::format_size;
/// assert_eq!(format_size(512), "512B");
/// assert_eq!(format_size(4096), "4K");
/// assert_eq!(format_size(8_499), "8.3K");
/// assert_eq!(format_size(64 << 20), "64M");
/// ```
pub fn format_size(bytes: u64) -> String {
    if bytes < 1024 {
        // Bytes say so: a bare `512` reads as a count.
        return format!("{bytes}B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while unit < UNITS.len() && value >= 1024.0 {
        value /= 1024.0;
        unit += 1;
    }
    let mut text = if value < 9.95 {
        format!("{value:.1}")
    } else if value.round() * (1u64 << UNITS[unit - 1].1) as f64 >= u64::MAX as f64 {
        // Rounding up (in f64, or in the print) would give more than a u64 holds, which the
        // parser refuses: whole units, rounded down, in integers.
        format!("{}", bytes >> UNITS[unit - 1].1)
    } else {
        format!("{value:.0}")
    };
    // 1023.6K rounds to 1024K: say 1M instead.
    if text == "1024" && unit < UNITS.len() {
        unit += 1;
        text = "1".to_string();
    }
    let text = text.strip_suffix(".0").unwrap_or(&text).to_string();
    format!("{text}{}", UNITS[unit - 1].0)
}

/// [`format_size`] of a number of MiB.
pub fn format_mib(mib: u64) -> String {
    format_size(mib.saturating_mul(1 << 20))
}

/// MiB written so that [`parse_mem_mib`] reads back the same value: `32G`, or `24062M`. For
/// config files labpool writes.
///
/// ```
/// use labpool_units::{format_mib_exact, parse_mem_mib};
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_size("50G").unwrap(), 50 << 30);
        assert_eq!(parse_size("1.5T").unwrap(), 3 << 39);
        assert_eq!(parse_size("500m").unwrap(), 500 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("2GB").unwrap(), 2 << 30);
        assert_eq!(parse_size("512B").unwrap(), 512);
        assert_eq!(parse_size(" 4096 ").unwrap(), 4096);
        assert_eq!(parse_size("8P").unwrap(), 8 << 50);
        for bad in [
            "",
            "-5G",
            "5X",
            "G",
            ".G",
            "1e3",
            "5 G",
            "1.2.3M",
            "99999999999999999999T",
            "none",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn memory_is_slurms_mem() {
        assert_eq!(parse_mem_mib("1024K").unwrap(), 1);
        assert_eq!(parse_mem_mib("1M").unwrap(), 1);
        assert_eq!(parse_mem_mib("2g").unwrap(), 2048);
        assert_eq!(parse_mem_mib("1T").unwrap(), 1024 * 1024);
        assert_eq!(parse_mem_mib("1GB").unwrap(), 1024);
        for bad in ["", "G", "12X", "-1G", "1.5G", "99999999999999G", "1P"] {
            assert!(parse_mem_mib(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_printer() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1K");
        assert_eq!(format_size(3 << 29), "1.5G");
        assert_eq!(format_size(50 << 30), "50G");
        assert_eq!(format_size((1 << 20) - 1), "1M");
        // Found by the fuzzer: rounding the largest sizes up printed 16384P, which overflows.
        assert_eq!(format_size(u64::MAX), "16383P");
        assert!(parse_size(&format_size(u64::MAX)).is_ok());
        assert_eq!(format_mib(512), "512M");
        assert_eq!(format_mib(32 * 1024), "32G");
        assert_eq!(format_mib(1536), "1.5G");
    }

    proptest! {
        /// What the printer writes, the parser reads back to within the printer's rounding.
        #[test]
        fn printed_sizes_read_back(bytes in 0u64..(1 << 60)) {
            let back = parse_size(&format_size(bytes)).unwrap();
            let error = (back as f64 - bytes as f64).abs() / (bytes.max(1) as f64);
            prop_assert!(error <= 0.05, "{bytes} -> {} -> {back}", format_size(bytes));
        }

        #[test]
        fn exact_mib_reads_back(mib in 0u64..(1 << 30)) {
            prop_assert_eq!(parse_mem_mib(&format_mib_exact(mib)).unwrap(), mib);
        }
    }
}
