//! A block of TCP ports for one test process's pools (their jobs' `[jobs] ports`), held by no
//! other test process at the same time: tests run side by side on one host's network, and two
//! pools leasing the same ports to their jobs make one job's server fail to bind (a notebook,
//! a session's port).
//!
//! The blocks are the ten of 2,000 ports from 10,000 to 29,999 (below the kernel's ephemeral
//! range). A process takes the first block, from its pid's, whose lock file
//! (`/tmp/labpool-test-ports-K.lock`) it can lock exclusively, and keeps the lock until it
//! exits; the kernel releases it then, even after a crash.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How many blocks there are, and how many ports each holds.
const BLOCKS: u32 = 10;
const SIZE: u32 = 2_000;

/// The first port of this process's block; its last is `first + 1_999`.
pub fn block() -> u32 {
    static FIRST: OnceLock<u32> = OnceLock::new();
    *FIRST.get_or_init(|| {
        let start = std::process::id() % BLOCKS;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            for i in 0..BLOCKS {
                let k = (start + i) % BLOCKS;
                if take(k) {
                    return 10_000 + k * SIZE;
                }
            }
            assert!(
                Instant::now() < deadline,
                "every block of test ports stayed held for 2 minutes (/tmp/labpool-test-ports-*.lock)"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

/// Locks block `k` for the rest of this process's life; false when another process holds it.
fn take(k: u32) -> bool {
    let path = format!("/tmp/labpool-test-ports-{k}.lock");
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    else {
        return false;
    };
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => {
            // Held until the process exits.
            std::mem::forget(lock);
            true
        }
        Err(_) => false,
    }
}
