//! How the links share their bandwidth among the copies in flight: max-min fair (progressive
//! filling) over every link a copy crosses, in priority classes, so that a class gets only
//! what the classes before it leave.
//!
//! The links: the shared storage's one link; each node's network link, in and out; and each
//! node's SSD, written by every copy into its cache (a streamed read is not written).

/// A link a flow crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Link {
    /// The shared storage's link.
    Shared,
    /// A node's network link, receiving.
    NicIn(usize),
    /// A node's network link, sending.
    NicOut(usize),
    /// A node's SSD, written.
    Ssd(usize),
}

/// The links' capacities, bytes per second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Capacities {
    pub(crate) shared: f64,
    pub(crate) nic: f64,
    pub(crate) ssd: f64,
}

impl Capacities {
    fn of(&self, link: Link) -> f64 {
        match link {
            Link::Shared => self.shared,
            Link::NicIn(_) | Link::NicOut(_) => self.nic,
            Link::Ssd(_) => self.ssd,
        }
    }
}

/// The rate of each flow, given the links it crosses and its class (0 first).
pub(crate) fn rates(caps: Capacities, flows: &[(Vec<Link>, u8)]) -> Vec<f64> {
    let mut used: std::collections::BTreeMap<Link, f64> = Default::default();
    let mut rates = vec![0.0; flows.len()];
    let mut classes: Vec<u8> = flows.iter().map(|(_, c)| *c).collect();
    classes.sort_unstable();
    classes.dedup();
    for class in classes {
        let mut open: Vec<usize> = (0..flows.len()).filter(|i| flows[*i].1 == class).collect();
        while !open.is_empty() {
            // The tightest link: the least capacity left per open flow crossing it.
            let mut tightest: Option<(f64, Link)> = None;
            let mut links: Vec<Link> = open.iter().flat_map(|i| flows[*i].0.clone()).collect();
            links.sort_unstable();
            links.dedup();
            for link in links {
                let crossing = open.iter().filter(|i| flows[**i].0.contains(&link)).count();
                // Below a byte a second, what is left is rounding.
                let left = caps.of(link) - used.get(&link).copied().unwrap_or(0.0);
                let left = if left < 1.0 { 0.0 } else { left };
                let share = left / crossing as f64;
                if tightest.is_none_or(|(s, _)| share < s) {
                    tightest = Some((share, link));
                }
            }
            let Some((share, link)) = tightest else {
                break;
            };
            // Every open flow through it gets that share, and is done.
            let (fixed, rest): (Vec<usize>, Vec<usize>) =
                open.into_iter().partition(|i| flows[*i].0.contains(&link));
            for i in fixed {
                rates[i] = share;
                for l in &flows[i].0 {
                    *used.entry(*l).or_default() += share;
                }
            }
            open = rest;
        }
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: Capacities = Capacities {
        shared: 100.0,
        nic: 1000.0,
        ssd: 2000.0,
    };

    #[test]
    fn the_shared_link_is_split_and_peers_use_their_nics() {
        let shared = |n| (vec![Link::Shared, Link::NicIn(n), Link::Ssd(n)], 0);
        let peer = |from, to| (vec![Link::NicOut(from), Link::NicIn(to), Link::Ssd(to)], 0);
        let r = rates(CAPS, &[shared(0), shared(1), peer(2, 3), peer(2, 4)]);
        assert_eq!(r, vec![50.0, 50.0, 500.0, 500.0]);
    }

    #[test]
    fn a_later_class_gets_what_the_first_leaves() {
        let stage = (vec![Link::Shared, Link::NicIn(0), Link::Ssd(0)], 0);
        let prefetch = (vec![Link::Shared, Link::NicIn(1), Link::Ssd(1)], 1);
        assert_eq!(
            rates(CAPS, &[stage.clone(), prefetch.clone()]),
            vec![100.0, 0.0]
        );
        assert_eq!(rates(CAPS, &[prefetch]), vec![100.0]);
        // A stage capped by its SSD leaves the rest of the shared link to the prefetch.
        let small = Capacities { ssd: 30.0, ..CAPS };
        assert_eq!(
            rates(small, &[stage, (vec![Link::Shared, Link::NicIn(1)], 1)]),
            vec![30.0, 70.0]
        );
    }
}
