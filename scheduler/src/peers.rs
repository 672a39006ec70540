//! Which peer serves a copy: the daemon's controller and the simulator both ask here, so the
//! simulator's peer staging is the daemon's.

/// Nodes that hold a version complete, in the order a stage should try them: those serving the
/// fewest stages first, so that eight nodes starting on one dataset spread over the nodes that
/// hold it, then by name. `candidates` gives each node with the stages it serves now.
pub fn peer_order<'a>(candidates: impl IntoIterator<Item = (&'a str, usize)>) -> Vec<&'a str> {
    let mut c: Vec<(usize, &str)> = candidates.into_iter().map(|(n, s)| (s, n)).collect();
    c.sort_unstable();
    c.into_iter().map(|(_, n)| n).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_least_busy_peer_first_then_by_name() {
        let order = super::peer_order([("gn3", 1), ("gn2", 0), ("gn1", 1)]);
        assert_eq!(order, vec!["gn2", "gn1", "gn3"]);
    }
}
