//! NVLink pairs. On a node whose GPUs are linked in pairs (two-way NVLink bridges, common on
//! RTX A6000 and RTX 3090 boxes), a one-GPU job, and the first slice on a card, takes a GPU
//! whose partner is already taken before it breaks a free pair, so that two-GPU jobs still find
//! a linked pair; a two-GPU job takes a linked free pair where there is one. GPUs linked to
//! several others (an NVSwitch box, where any two are linked) have no partner here, and
//! placement takes the lowest indexes, as on a node without links.
//!
//! Pure functions on GPU masks (bit `i` is GPU `i`); lowest index first among equals.

use crate::profile::lowest_bits;

/// No partner.
pub const NO_PARTNER: u8 = u8::MAX;

fn bit(i: u8) -> u64 {
    if i < 64 { 1u64 << i } else { 0 }
}

fn indexes(mask: u64) -> impl Iterator<Item = u8> {
    let mut m = mask;
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let i = m.trailing_zeros() as u8;
            m &= m - 1;
            i
        })
    })
}

/// Chooses `n` of `candidates`. `free` are the wholly free GPUs: a pair is whole while both of
/// its GPUs are free. `partner[i]` is GPU `i`'s partner, or [`NO_PARTNER`].
pub fn choose(candidates: u64, n: u32, free: u64, partner: &[u8; 64]) -> u64 {
    let paired = indexes(candidates).any(|i| partner[i as usize] != NO_PARTNER);
    if n == 0 || !paired {
        return lowest_bits(candidates, n);
    }
    if n == 1 {
        // A GPU whose pair is already broken (its partner held), or that has no partner.
        let broken = indexes(candidates)
            .filter(|i| {
                let p = partner[*i as usize];
                p == NO_PARTNER || free & bit(p) == 0
            })
            .fold(0u64, |m, i| m | bit(i));
        return lowest_bits(if broken != 0 { broken } else { candidates }, 1);
    }
    // Whole linked pairs first, then the lowest of the rest.
    let mut out = 0u64;
    let mut left = n;
    for i in indexes(candidates) {
        let p = partner[i as usize];
        if left >= 2 && p != NO_PARTNER && p > i && candidates & bit(p) != 0 && out & bit(i) == 0 {
            out |= bit(i) | bit(p);
            left -= 2;
        }
    }
    out | lowest_bits(candidates & !out, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four GPUs linked 0-1 and 2-3.
    fn pairs() -> [u8; 64] {
        let mut p = [NO_PARTNER; 64];
        (p[0], p[1], p[2], p[3]) = (1, 0, 3, 2);
        p
    }

    #[test]
    fn one_gpu_jobs_fill_a_broken_pair_first() {
        let p = pairs();
        // GPU 2 is held: its partner 3 is taken before a whole pair is broken.
        let free = 0b1011;
        assert_eq!(choose(free, 1, free, &p), 0b1000);
        // All free: the lowest, which breaks pair 0-1; the next one-GPU job fills it.
        assert_eq!(choose(0b1111, 1, 0b1111, &p), 0b0001);
        assert_eq!(choose(0b1110, 1, 0b1110, &p), 0b0010);
    }

    #[test]
    fn two_gpu_jobs_take_a_linked_pair() {
        let p = pairs();
        // 1, 2 and 3 free: 1-2 are not linked, 2-3 are.
        assert_eq!(choose(0b1110, 2, 0b1110, &p), 0b1100);
        // No linked pair left: the lowest two.
        assert_eq!(choose(0b1010, 2, 0b1010, &p), 0b1010);
        // Four: both pairs.
        assert_eq!(choose(0b1111, 4, 0b1111, &p), 0b1111);
    }

    #[test]
    fn without_links_the_lowest_indexes() {
        let none = [NO_PARTNER; 64];
        assert_eq!(choose(0b1011, 1, 0b1011, &none), 0b0001);
        assert_eq!(choose(0b1110, 2, 0b1110, &none), 0b0110);
    }
}
