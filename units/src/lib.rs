//! Sizes, rates, durations and counts, read with one grammar and written with one printer, so that
//! config files, command-line options and output agree on what `G` means.
//!
//! `K`, `M`, `G`, `T` and `P` are binary everywhere (`50G` is 50 × 2^30 bytes), as `du -h`,
//! `df -h` and Slurm's `--mem` read them; a trailing `B` or `iB` changes nothing (`2GB` and
//! `2GiB` are both 2^31 bytes). Only bit rates are decimal (`1Gbit` is 10^9 bits per second),
//! because network links are sold that way.
//!
//! ```
//! use labpool_units::{format_size, parse_size};
//! assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
//! assert_eq!(format_size(3 << 29), "1.5G");
//! ```

#![deny(missing_docs)]

mod count;
mod duration;
mod rate;
mod size;

pub use count::count;
pub use duration::{format_duration, format_duration_approx, format_elapsed, parse_duration};
pub use rate::{format_rate, parse_rate};
pub use size::{format_mib, format_mib_exact, format_size, parse_mem_mib, parse_size};

/// Why a size, rate or duration was refused. Each message gives the text and a form that works.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// A size did not parse.
    #[error(
        "invalid size '{0}': write a number with K, M, G, T or P (binary: 1G is 1024M), e.g. 500G or 1.5T"
    )]
    Size(String),
    /// A memory size (Slurm's `--mem`) did not parse.
    #[error(
        "invalid memory size '{0}': use a whole number of megabytes or a K/M/G/T suffix, e.g. --mem=32G"
    )]
    Memory(String),
    /// A rate did not parse.
    #[error(
        "invalid rate '{0}': write bytes per second as a size (200M, 2G/s) or bits per second (1Gbit, 10Gbit)"
    )]
    Rate(String),
    /// A duration did not parse.
    #[error("invalid duration '{0}': write e.g. 30s, 5m, 36h or 7d")]
    Duration(String),
}
