//! What labpool's tests share across its crates.
//!
//! - **Strict runs.** A test that needs root, a package or a tool it cannot find skips loudly
//!   ([`skip`]); under `LABPOOL_TEST_STRICT=1` (CI, whose `scripts/test` installs everything)
//!   the same skip is a failure, so that nothing passes in CI without having run.
//! - **Deterministic data.** [`bytes`] and [`rng`] give the same values for the same seed on
//!   every machine, from one well-kept generator rather than a copy in each test.
//! - **Waits.** [`wait::wait_until`] polls for what another process does, with a deadline and a
//!   message that says what never happened.
//! - **Test users.** [`users::ensure_user`] makes the local users the permission tests run as.
//! - **Ports.** [`ports::block`] gives a test process job ports no other test process uses.
//! - **Small file systems.** [`small_fs::SmallFs`] mounts a tiny tmpfs (as root) to fill a disk
//!   on purpose.

pub mod ports;
pub mod small_fs;
pub mod users;
pub mod wait;

/// The variable that makes skips failures.
pub const STRICT_VAR: &str = "LABPOOL_TEST_STRICT";

/// True in a strict run: `LABPOOL_TEST_STRICT` is set to anything but empty or `0`.
pub fn strict() -> bool {
    std::env::var_os(STRICT_VAR).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Says why a test cannot run here: on standard error, past the harness's capture, so the skip
/// shows even on a pass. In a strict run it panics instead.
pub fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
    assert!(
        !strict(),
        "{STRICT_VAR} is set, so this must not be skipped: {why}"
    );
}

/// A generator seeded with `seed`.
pub fn rng(seed: u64) -> fastrand::Rng {
    fastrand::Rng::with_seed(seed)
}

/// `len` pseudo-random bytes from `seed`: files that differ from each other and from zeros,
/// and do not compress.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    rng(seed).fill(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_another_seed_others() {
        assert_eq!(bytes(7, 1000), bytes(7, 1000));
        assert_ne!(bytes(7, 1000), bytes(8, 1000));
        assert!(bytes(7, 1000).iter().any(|b| *b != 0));
    }
}
