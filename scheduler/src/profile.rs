//! A node's free capacity over time, for conservative backfill.
//!
//! The profile starts with what is free now. Each running job gives its GPUs, cores and memory
//! back at its time limit; each reservation takes them for its interval. A job fits at time
//! `t` when the capacity is enough over the whole of `[t, t + limit)`. Starting a job now is
//! then allowed only where it fits now, so that it delays no reservation: the check and the
//! booking are the same operation. GPUs are bit masks (index `i` is bit `i`), so a node may have
//! at most 64 of them.

use crate::time::Timestamp;

/// Resources at one moment, or an amount of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capacity {
    /// GPU indexes, as a bit mask.
    pub gpus: u64,
    /// Cores.
    pub cpus: i64,
    /// Memory, MiB.
    pub mem: i64,
}

/// What a job needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// How many GPUs.
    pub gpus: u32,
    /// Which GPUs qualify (by type), as a mask.
    pub eligible: u64,
    /// Cores.
    pub cpus: i64,
    /// Memory, MiB.
    pub mem: i64,
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
            s.free.gpus |= amount.gpus;
            s.free.cpus += amount.cpus;
            s.free.mem += amount.mem;
        }
    }

    /// `amount` is held over `[from, until)`.
    pub fn take(&mut self, from: Timestamp, until: Timestamp, amount: Capacity) {
        let i = self.split(from.max(self.now()));
        let j = if until == Timestamp::NEVER {
            self.segments.len()
        } else {
            self.split(until)
        };
        for s in &mut self.segments[i..j] {
            s.free.gpus &= !amount.gpus;
            s.free.cpus -= amount.cpus;
            s.free.mem -= amount.mem;
        }
    }

    /// The GPUs (lowest indexes first) that `need` would take if it ran over `[from, until)`,
    /// or `None` when it does not fit there.
    pub fn fits(&self, from: Timestamp, until: Timestamp, need: &Need) -> Option<Capacity> {
        let mut gpus = need.eligible;
        let mut cpus = i64::MAX;
        let mut mem = i64::MAX;
        let start = self.segments.partition_point(|s| s.from <= from).max(1) - 1;
        for s in &self.segments[start..] {
            if s.from >= until {
                break;
            }
            gpus &= s.free.gpus;
            cpus = cpus.min(s.free.cpus);
            mem = mem.min(s.free.mem);
        }
        if (gpus.count_ones() < need.gpus) || cpus < need.cpus || mem < need.mem {
            return None;
        }
        Some(Capacity {
            gpus: lowest_bits(gpus, need.gpus),
            cpus: need.cpus,
            mem: need.mem,
        })
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
        Capacity { gpus, cpus, mem: 0 }
    }

    fn need(gpus: u32) -> Need {
        Need {
            gpus,
            eligible: u64::MAX,
            cpus: 1,
            mem: 0,
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
    fn bits() {
        assert_eq!(lowest_bits(0b1011_0100, 2), 0b0001_0100);
        assert_eq!(lowest_bits(0b1, 3), 0b1);
    }
}
