//! Slices: a part of one GPU, with a share of its memory that the job can count on.
//!
//! An admin says which cards may be sliced and into what (`[node] slices = { rtx4090 = [2, 4] }`:
//! halves and quarters). Such a card is cut into *shards*, the least common multiple of its
//! slices (4 here), and everything that shares the card counts in shards:
//! - a typed slice `--gres=gpu:rtx4090.4:1` (a quarter) holds `shards / 4` of them;
//! - Slurm's `--gres=shard:N` holds N of them, on one card;
//! - `--gpu-share` on a sliced card holds one shard.
//!
//! On a card with `gpu_share = N` and no slices, each `--gpu-share` job holds one of N slots,
//! which is the same count with no memory attached. A slice's memory is the card's memory times
//! its shards over the card's shards; the agent enforces it (see the `gpu-slice` crate).

use crate::job::Resources;
use crate::node::GpuDevice;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest denominator a slice may have: `TYPE.16` is a sixteenth of a card.
pub const MAX_DENOMINATOR: u32 = 16;

/// The most shards one card may be cut into: what the scheduler's per-GPU counters hold.
pub const MAX_SHARDS: u32 = 64;

/// What part of one card a job asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slice {
    /// `1/D` of a card (`--gres=gpu:TYPE.D:1`).
    Fraction(u32),
    /// N shards of one card (`--gres=shard:N`).
    Shards(u32),
}

impl fmt::Display for Slice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slice::Fraction(d) => write!(f, "1/{d} of a GPU"),
            Slice::Shards(1) => f.write_str("1 shard of a GPU"),
            Slice::Shards(n) => write!(f, "{n} shards of a GPU"),
        }
    }
}

impl Slice {
    /// The slice as Slurm's `--gres` writes it: `gpu:rtx4090.4:1` or `shard:2` (a typed slice
    /// always names its type; `gpu` stands in should one come without).
    pub fn gres(self, gpu_type: Option<&str>) -> String {
        match self {
            Slice::Fraction(d) => format!("gpu:{}.{d}:1", gpu_type.unwrap_or("gpu")),
            Slice::Shards(n) => format!("shard:{n}"),
        }
    }
}

/// The shards of a card sliced into `slices` (their least common multiple), or `None` when it
/// is over [`MAX_SHARDS`] or a slice is out of range.
pub fn shards_of(slices: &[u32]) -> Option<u32> {
    slices.iter().try_fold(1u32, |acc, d| {
        if !(2..=MAX_DENOMINATOR).contains(d) {
            return None;
        }
        let l = acc / gcd(acc, *d) * d;
        (l <= MAX_SHARDS).then_some(l)
    })
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// How many share units a sharing job (a slice, or `--gpu-share`) holds on `gpu`; 0 when the
/// card cannot take it (not sliced into that fraction, too few shards, or not shared at all).
/// A job that shares no GPU holds none.
pub fn units_on(r: &Resources, gpu: &GpuDevice) -> u8 {
    let units = match r.slice {
        Some(Slice::Fraction(d)) if gpu.slices.contains(&d) => gpu.share / d,
        Some(Slice::Shards(n)) if !gpu.slices.is_empty() && n <= gpu.share => n,
        Some(_) => 0,
        None if r.gpu_share && gpu.share > 1 => 1,
        None => 0,
    };
    units.min(255) as u8
}

/// The memory, MiB, that `slice` carries on a card of `card_mib` cut into `shards`; 0 when the
/// card's memory is unknown.
pub fn slice_memory_mib(slice: Slice, card_mib: u64, shards: u32) -> u64 {
    let shards = u64::from(shards.max(1));
    match slice {
        Slice::Fraction(d) => card_mib / u64::from(d.max(1)),
        Slice::Shards(n) => card_mib * u64::from(n).min(shards) / shards,
    }
}

/// The GPU memory, MiB, that `units` share units of `gpu` carry: 0 on an unsliced card, whose
/// sharers are not metered, or where the card's memory is unknown.
pub fn memory_mib(gpu: &GpuDevice, units: u8) -> u64 {
    if gpu.slices.is_empty() || gpu.share == 0 {
        return 0;
    }
    gpu.memory_mib * u64::from(units) / u64::from(gpu.share)
}

/// The part of a card that `units` of `gpu` are, in thousandths (what limits and credits
/// count): 1000 for a whole card.
pub fn milli_gpus(gpu: &GpuDevice, units: u8) -> u32 {
    if units == 0 || gpu.share <= 1 {
        return 1000;
    }
    (1000 * u32::from(units)).div_ceil(gpu.share)
}

/// The smallest slice, of those a card of `card_mib` is cut into (`slices`), whose memory holds
/// `peak_mib` with a tenth to spare: its denominator, or `None` when none does.
pub fn smallest_fitting(peak_mib: u64, card_mib: u64, slices: &[u32]) -> Option<u32> {
    let need = peak_mib + peak_mib / 10;
    slices
        .iter()
        .copied()
        .filter(|d| card_mib > 0 && card_mib / u64::from((*d).max(1)) >= need)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(slices: &[u32]) -> GpuDevice {
        GpuDevice {
            index: 0,
            gpu_type: "rtx4090".into(),
            product: "NVIDIA GeForce RTX 4090".into(),
            memory_mib: 24576,
            uuid: None,
            share: shards_of(slices).unwrap_or(1),
            slices: slices.to_vec(),
            nvlink_peer: None,
        }
    }

    fn asks(slice: Option<Slice>, gpu_share: bool) -> Resources {
        Resources {
            gpus: 1,
            slice,
            gpu_share,
            ..Resources::default()
        }
    }

    #[test]
    fn the_smallest_slice_that_holds_a_peak_with_room() {
        assert_eq!(smallest_fitting(9800, 24576, &[2, 4]), Some(2));
        assert_eq!(smallest_fitting(5000, 24576, &[2, 4]), Some(4));
        // 5600 MiB and a tenth is over a quarter's 6144.
        assert_eq!(smallest_fitting(5600, 24576, &[2, 4]), Some(2));
        assert_eq!(smallest_fitting(20000, 24576, &[2, 4]), None);
        assert_eq!(smallest_fitting(100, 0, &[2, 4]), None);
    }

    #[test]
    fn shards_are_the_least_common_multiple() {
        assert_eq!(shards_of(&[2, 4]), Some(4));
        assert_eq!(shards_of(&[2, 3]), Some(6));
        assert_eq!(shards_of(&[]), Some(1));
        assert_eq!(shards_of(&[1]), None);
        assert_eq!(shards_of(&[17]), None);
        // 7 * 9 * 16 is far over what a card's counters hold.
        assert_eq!(shards_of(&[7, 9, 16]), None);
    }

    #[test]
    fn units_and_memory_follow_the_fraction() {
        let c = card(&[2, 4]);
        let quarter = units_on(&asks(Some(Slice::Fraction(4)), false), &c);
        let half = units_on(&asks(Some(Slice::Fraction(2)), false), &c);
        assert_eq!((quarter, half), (1, 2));
        assert_eq!(memory_mib(&c, quarter), 6144);
        assert_eq!(memory_mib(&c, half), 12288);
        assert_eq!(milli_gpus(&c, quarter), 250);
        // An eighth was not offered on this card; three shards were.
        assert_eq!(units_on(&asks(Some(Slice::Fraction(8)), false), &c), 0);
        assert_eq!(units_on(&asks(Some(Slice::Shards(3)), false), &c), 3);
        assert_eq!(units_on(&asks(Some(Slice::Shards(5)), false), &c), 0);
        // --gpu-share on a sliced card is one shard, metered.
        assert_eq!(units_on(&asks(None, true), &c), 1);
        // A card with no slices takes no slice, and a whole job holds no units.
        assert_eq!(
            units_on(&asks(Some(Slice::Fraction(2)), false), &card(&[])),
            0
        );
        assert_eq!(units_on(&asks(None, false), &c), 0);
    }
}
