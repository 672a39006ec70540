//! A node's free capacity over time, for conservative backfill.
//!
//! The profile starts with what is free now. Each running job gives its GPUs, cores and memory
//! back at its time limit; each reservation takes them for its interval. A job fits at time
//! `t` when the capacity is enough over the whole of `[t, t + limit)`. Starting a job now is
//! then allowed only where it fits now, so that it delays no reservation: the check and the
//! booking are the same operation. GPUs are bit masks (index `i` is bit `i`), so a node may have
//! at most 64 of them.
//!
//! Shared GPUs. A GPU configured with `share = N` (N > 1) has N share units (slots for
//! `--gpu-share`, shards for a sliced card). At each moment a GPU is in one of three states:
//! wholly free (its bit is set, no sharer), held whole (bit clear, no sharer) or shared (bit
//! clear, `shared[i]` units held by sharers). A whole need takes wholly free GPUs, as before; a
//! shared need takes its units (`Need::units`) on GPUs that are wholly free or shared with
//! enough units left, over every moment of its interval. Taking units clears the bit and counts
//! them; giving the last ones back sets the bit again. Every operation only counts, so a
//! job that starts later (a backfilled sharer) can never hold a GPU that a reservation for a
//! whole job took over the same interval, and the reservation can never be delayed by it.

use crate::pairs::choose;
use crate::time::Timestamp;

/// Resources at one moment, or an amount of them.
///
/// As a moment: `gpus` are the wholly free GPUs and `shared[i]` the share units sharing jobs
/// hold on GPU `i`. As an amount: `gpus` are the GPUs taken, and `shared[i]` the units taken on
/// GPU `i` where it is taken as a sharer rather than whole (0 where whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// GPU indexes, as a bit mask.
    pub gpus: u64,
    /// Share units held on each GPU, by index.
    pub shared: [u8; 64],
    /// Cores.
    pub cpus: i64,
    /// Memory, MiB.
    pub mem: i64,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity {
            gpus: 0,
            shared: [0; 64],
            cpus: 0,
            mem: 0,
        }
    }
}

impl Capacity {
    /// The GPUs `need` could take at this moment: wholly free eligible GPUs for a whole need;
    /// for a shared need, eligible GPUs with `share` > 1 that are wholly free or shared with
    /// the need's units left.
    pub fn available_gpus(&self, need: &Need) -> u64 {
        if !need.shared {
            return self.gpus & need.eligible;
        }
        let mut out = 0u64;
        let mut m = need.eligible;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let (limit, held, units) = (need.share[i], self.shared[i], need.units[i]);
            let wholly_free = self.gpus & (1u64 << i) != 0;
            let room = u16::from(held) + u16::from(units) <= u16::from(limit);
            if limit > 1 && units > 0 && room && (wholly_free || held > 0) {
                out |= 1u64 << i;
            }
        }
        out
    }

    /// GPUs that sharing jobs hold at this moment, as a mask.
    pub fn shared_mask(&self) -> u64 {
        self.shared
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .fold(0u64, |m, (i, _)| m | (1u64 << i))
    }

    /// Gives `amount` back to this moment's free capacity.
    fn give(&mut self, amount: &Capacity) {
        let mut m = amount.gpus;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if amount.shared[i] > 0 {
                self.shared[i] = self.shared[i].saturating_sub(amount.shared[i]);
                if self.shared[i] == 0 {
                    self.gpus |= 1u64 << i;
                }
            } else {
                self.gpus |= 1u64 << i;
            }
        }
        self.cpus += amount.cpus;
        self.mem += amount.mem;
    }

    /// Takes `amount` from this moment's free capacity.
    fn hold(&mut self, amount: &Capacity) {
        let mut m = amount.gpus;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.gpus &= !(1u64 << i);
            self.shared[i] = self.shared[i].saturating_add(amount.shared[i]);
        }
        self.cpus -= amount.cpus;
        self.mem -= amount.mem;
    }
}

/// What a job needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// How many GPUs.
    pub gpus: u32,
    /// Which GPUs qualify (by type), as a mask.
    pub eligible: u64,
    /// Share units of each GPU rather than whole GPUs (`--gpu-share`, a slice).
    pub shared: bool,
    /// Each GPU's `share` (how many units it has), by index; read only for a shared need,
    /// where a GPU whose share is under 2 never qualifies.
    pub share: [u8; 64],
    /// The units a shared need takes on each GPU, by index; 0 where the GPU cannot take it.
    pub units: [u8; 64],
    /// GPUs a whole need takes only when no other will do: those that sharing jobs may hold,
    /// so that whole jobs are packed away from shared and sliced cards.
    pub avoid: u64,
    /// Each GPU's NVLink partner, or [`crate::pairs::NO_PARTNER`] (see [`crate::pairs`]).
    pub partner: [u8; 64],
    /// Cores.
    pub cpus: i64,
    /// Memory, MiB.
    pub mem: i64,
}

impl Need {
    /// A need for `gpus` whole GPUs among `eligible`, `cpus` cores and `mem` MiB.
    pub fn whole(gpus: u32, eligible: u64, cpus: i64, mem: i64) -> Need {
        Need {
            gpus,
            eligible,
            shared: false,
            share: [1; 64],
            units: [0; 64],
            avoid: 0,
            partner: [crate::pairs::NO_PARTNER; 64],
            cpus,
            mem,
        }
    }
}

#[derive(Debug, Clone)]
struct Segment {
    from: Timestamp,
    free: Capacity,
}

/// Free capacity of one node from now on, as a step function.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Segments in time order; each lasts until the next one starts, the last one for ever.
    segments: Vec<Segment>,
}

impl Profile {
    /// A profile that starts at `now` with `free`.
    pub fn new(now: Timestamp, free: Capacity) -> Profile {
        Profile {
            segments: vec![Segment { from: now, free }],
        }
    }

    fn now(&self) -> Timestamp {
        self.segments[0].from
    }

    /// What is free now.
    pub fn free_now(&self) -> Capacity {
        self.segments[0].free
    }

    /// Index of the segment that starts at `t`, splitting one if needed. `t` >= now.
    fn split(&mut self, t: Timestamp) -> usize {
        let i = self.segments.partition_point(|s| s.from <= t) - 1;
        if self.segments[i].from == t {
            return i;
        }
        let free = self.segments[i].free;
        self.segments.insert(i + 1, Segment { from: t, free });
        i + 1
    }

    /// `amount` comes back (a running job ends) at `at`.
    pub fn release(&mut self, at: Timestamp, amount: Capacity) {
        if at == Timestamp::NEVER {
            return;
        }
        let at = at.max(self.now());
        let i = self.split(at);
        for s in &mut self.segments[i..] {
            s.free.give(&amount);
        }
    }

    /// `amount` is held over `[from, until)`.
    pub fn take(&mut self, from: Timestamp, until: Timestamp, amount: Capacity) {
        for s in self.between(from, until) {
            s.free.hold(&amount);
        }
    }

    /// `amount` comes back over `[from, until)` only: a running job that will end at `from`
    /// instead of at `until` (it was told to stop).
    pub fn give(&mut self, from: Timestamp, until: Timestamp, amount: Capacity) {
        for s in self.between(from, until) {
            s.free.give(&amount);
        }
    }

    /// The segments that cover `[from, until)` from now on, split at its ends; none when the
    /// interval is empty or over.
    fn between(&mut self, from: Timestamp, until: Timestamp) -> &mut [Segment] {
        if from >= until || until <= self.now() {
            return &mut [];
        }
        let i = self.split(from.max(self.now()));
        let j = if until == Timestamp::NEVER {
            self.segments.len()
        } else {
            self.split(until)
        };
        &mut self.segments[i..j]
    }

    /// The GPUs that `need` would take if it ran over `[from, until)`, or `None` when it does
    /// not fit there. A whole need takes the lowest indexes, those it should avoid last. A
    /// shared need takes GPUs that sharing jobs hold at some moment of the interval first, so
    /// that small jobs pack together and GPUs stay wholly free for whole jobs, then the lowest
    /// indexes. Where GPUs are linked in pairs, both keep pairs whole ([`crate::pairs`]).
    pub fn fits(&self, from: Timestamp, until: Timestamp, need: &Need) -> Option<Capacity> {
        let mut gpus = need.eligible;
        let mut wholly = need.eligible;
        let mut with_sharers = 0u64;
        let mut cpus = i64::MAX;
        let mut mem = i64::MAX;
        let start = self.segments.partition_point(|s| s.from <= from).max(1) - 1;
        for s in &self.segments[start..] {
            if s.from >= until {
                break;
            }
            gpus &= s.free.available_gpus(need);
            wholly &= s.free.gpus;
            if need.shared {
                with_sharers |= s.free.shared_mask();
            }
            cpus = cpus.min(s.free.cpus);
            mem = mem.min(s.free.mem);
        }
        if (gpus.count_ones() < need.gpus) || cpus < need.cpus || mem < need.mem {
            return None;
        }
        let mut taken = Capacity {
            cpus: need.cpus,
            mem: need.mem,
            ..Capacity::default()
        };
        if need.shared {
            let packed = lowest_bits(gpus & with_sharers, need.gpus);
            let rest = need.gpus - packed.count_ones();
            let fresh = choose(gpus & !with_sharers, rest, wholly, &need.partner);
            taken.gpus = packed | fresh;
            let mut m = taken.gpus;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                taken.shared[i] = need.units[i];
                m &= m - 1;
            }
        } else {
            let open = gpus & !need.avoid;
            let preferred = if open.count_ones() >= need.gpus {
                choose(open, need.gpus, wholly, &need.partner)
            } else {
                open
            };
            let rest = need.gpus - preferred.count_ones();
            taken.gpus = preferred | choose(gpus & need.avoid, rest, wholly, &need.partner);
        }
        Some(taken)
    }

    /// The times from now at which what is free changes, now first.
    pub fn changes(&self) -> impl Iterator<Item = Timestamp> + '_ {
        self.segments.iter().map(|s| s.from)
    }

    /// The earliest time from now at which `need` fits for `duration_ms` (`None`: for ever),
    /// with the GPUs it would take; `None` when it never does.
    pub fn earliest(&self, need: &Need, duration_ms: Option<i64>) -> Option<(Timestamp, Capacity)> {
        self.segments.iter().find_map(|s| {
            let until = match duration_ms {
                Some(d) => Timestamp(s.from.0.saturating_add(d)),
                None => Timestamp::NEVER,
            };
            self.fits(s.from, until, need).map(|c| (s.from, c))
        })
    }
}

/// The `n` lowest set bits of `mask`.
pub fn lowest_bits(mask: u64, n: u32) -> u64 {
    let mut out = 0u64;
    let mut m = mask;
    for _ in 0..n {
        if m == 0 {
            break;
        }
        let bit = m & m.wrapping_neg();
        out |= bit;
        m &= !bit;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(gpus: u64, cpus: i64) -> Capacity {
        Capacity {
            gpus,
            cpus,
            ..Capacity::default()
        }
    }

    fn need(gpus: u32) -> Need {
        Need::whole(gpus, u64::MAX, 1, 0)
    }

    /// A shared need for `gpus` GPUs on a node whose first `n` GPUs have `share`.
    fn shared_need(gpus: u32, n: usize, share: u8) -> Need {
        let mut s = [0u8; 64];
        s[..n].fill(share);
        let mut units = [0u8; 64];
        units[..n].fill(1);
        Need {
            shared: true,
            share: s,
            units,
            ..Need::whole(gpus, (1u64 << n) - 1, 1, 0)
        }
    }

    #[test]
    fn releases_and_reservations_shape_the_future() {
        // 4 GPUs; GPUs 0,1 free now; 2,3 come back at t=100.
        let mut p = Profile::new(Timestamp(0), cap(0b0011, 8));
        p.release(Timestamp(100), cap(0b1100, 0));
        assert_eq!(
            p.fits(Timestamp(0), Timestamp(50), &need(2)).unwrap().gpus,
            0b0011
        );
        assert!(p.fits(Timestamp(0), Timestamp(50), &need(3)).is_none());
        let (t, c) = p.earliest(&need(4), Some(10)).unwrap();
        assert_eq!((t, c.gpus), (Timestamp(100), 0b1111));
        // Reserve all four from 100 to 110; a 2-GPU job now may run only if it ends by 100.
        p.take(Timestamp(100), Timestamp(110), c);
        assert!(p.fits(Timestamp(0), Timestamp(100), &need(2)).is_some());
        assert!(p.fits(Timestamp(0), Timestamp(101), &need(2)).is_none());
        assert!(p.fits(Timestamp(0), Timestamp::NEVER, &need(1)).is_none());
        // After the reservation the node is whole again.
        assert_eq!(p.earliest(&need(4), None).unwrap().0, Timestamp(110));
    }

    #[test]
    fn two_sharers_fit_on_a_share_2_gpu_and_never_three() {
        let mut p = Profile::new(Timestamp(0), cap(0b1, 8));
        let n = shared_need(1, 1, 2);
        let a = p.fits(Timestamp(0), Timestamp::NEVER, &n).unwrap();
        assert_eq!((a.gpus, a.shared[0]), (0b1, 1));
        p.take(Timestamp(0), Timestamp::NEVER, a);
        assert_eq!((p.free_now().gpus, p.free_now().shared[0]), (0, 1));
        // A whole job no longer fits; a second sharer does, on the same GPU.
        assert!(p.fits(Timestamp(0), Timestamp(10), &need(1)).is_none());
        let b = p.fits(Timestamp(0), Timestamp::NEVER, &n).unwrap();
        assert_eq!(b.gpus, 0b1);
        p.take(Timestamp(0), Timestamp::NEVER, b);
        assert_eq!(p.free_now().shared[0], 2);
        // The third does not, at any time.
        assert!(p.fits(Timestamp(0), Timestamp(10), &n).is_none());
        assert!(p.earliest(&n, Some(10)).is_none());
        // One sharer leaves at 100: the third fits from then on; the GPU is whole again only
        // once both have left.
        p.release(Timestamp(100), a);
        assert_eq!(p.earliest(&n, Some(10)).unwrap().0, Timestamp(100));
        assert!(p.earliest(&need(1), Some(10)).is_none());
        p.release(Timestamp(200), b);
        assert_eq!(p.earliest(&need(1), Some(10)).unwrap().0, Timestamp(200));
        assert_eq!(p.segments.last().unwrap().free.gpus, 0b1);
        assert_eq!(p.segments.last().unwrap().free.shared[0], 0);
    }

    #[test]
    fn a_gpu_with_share_1_is_never_shared() {
        let p = Profile::new(Timestamp(0), cap(0b11, 8));
        // GPU 0 has share 1, GPU 1 share 2: a sharer takes GPU 1 only.
        let mut n = shared_need(1, 2, 2);
        n.share[0] = 1;
        assert_eq!(
            p.fits(Timestamp(0), Timestamp::NEVER, &n).unwrap().gpus,
            0b10
        );
        assert!(
            p.fits(Timestamp(0), Timestamp::NEVER, &shared_need(2, 2, 1))
                .is_none()
        );
        n.gpus = 2;
        assert!(p.fits(Timestamp(0), Timestamp::NEVER, &n).is_none());
    }

    #[test]
    fn sharers_pack_onto_shared_gpus_first() {
        let mut p = Profile::new(Timestamp(0), cap(0b1111, 8));
        let n = shared_need(1, 4, 4);
        // A whole job holds GPU 0; a sharer then takes GPU 1, and the next sharers join it.
        p.take(Timestamp(0), Timestamp::NEVER, cap(0b1, 0));
        for _ in 0..4 {
            let c = p.fits(Timestamp(0), Timestamp::NEVER, &n).unwrap();
            assert_eq!(c.gpus, 0b10);
            p.take(Timestamp(0), Timestamp::NEVER, c);
        }
        // GPU 1 is full: the fifth sharer opens GPU 2.
        let c = p.fits(Timestamp(0), Timestamp::NEVER, &n).unwrap();
        assert_eq!(c.gpus, 0b100);
        // A 2-GPU sharer joins GPU 1's sharers only where a slot is left: GPUs 2 and 3 then.
        p.take(Timestamp(0), Timestamp::NEVER, c);
        let two = shared_need(2, 4, 4);
        assert_eq!(
            p.fits(Timestamp(0), Timestamp::NEVER, &two).unwrap().gpus,
            0b1100
        );
        // Only GPU 3 is still wholly free.
        assert_eq!(p.free_now().gpus, 0b1000);
    }

    #[test]
    fn a_whole_reservation_keeps_sharers_out_of_its_interval() {
        // GPU 0 (share 2) is wholly free now; a whole job is reserved on it over [100, 200).
        let mut p = Profile::new(Timestamp(0), cap(0b1, 8));
        let (at, c) = p.earliest(&need(1), Some(100)).unwrap();
        assert_eq!(at, Timestamp(0));
        p.take(Timestamp(100), Timestamp(200), c);
        let n = shared_need(1, 1, 2);
        // A sharer may backfill only if it ends by 100, or start at 200.
        assert!(p.fits(Timestamp(0), Timestamp(100), &n).is_some());
        assert!(p.fits(Timestamp(0), Timestamp(101), &n).is_none());
        assert_eq!(p.earliest(&n, Some(150)).unwrap().0, Timestamp(200));
        // Two sharers booked before 100 leave the reservation whole.
        let a = p.fits(Timestamp(0), Timestamp(100), &n).unwrap();
        p.take(Timestamp(0), Timestamp(100), a);
        let b = p.fits(Timestamp(0), Timestamp(100), &n).unwrap();
        p.take(Timestamp(0), Timestamp(100), b);
        assert!(p.fits(Timestamp(0), Timestamp(50), &n).is_none());
        assert_eq!(p.earliest(&need(1), Some(100)).unwrap().0, Timestamp(200));
        let at_100 = p
            .segments
            .iter()
            .find(|s| s.from == Timestamp(100))
            .unwrap();
        assert_eq!((at_100.free.gpus, at_100.free.shared[0]), (0, 0));
    }

    #[test]
    fn bits() {
        assert_eq!(lowest_bits(0b1011_0100, 2), 0b0001_0100);
        assert_eq!(lowest_bits(0b1, 3), 0b1);
    }
}
