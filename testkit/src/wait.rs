//! Waiting in a test for something another process does: one poll loop with a deadline,
//! instead of a hand-written one in each test.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// Polls `done` every 50 ms until it holds. After `timeout` the test fails with `why()` (read
/// only then, so it may describe the state that was waited on) and how long it waited.
pub fn wait_until<S: Display>(
    timeout: Duration,
    done: impl FnMut() -> bool,
    why: impl FnOnce() -> S,
) {
    wait_until_every(Duration::from_millis(50), timeout, done, why);
}

/// [`wait_until`], polling every `poll`: for a test that must act within moments of what it
/// waits for (kill a controller while a stage is still copying).
pub fn wait_until_every<S: Display>(
    poll: Duration,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
    why: impl FnOnce() -> S,
) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() >= timeout {
            panic!("after {:.1} s: {}", start.elapsed().as_secs_f64(), why());
        }
        std::thread::sleep(poll);
    }
}

/// Waits (20 s at most) for a job's script to write its shell's pid and a newline to `file`,
/// and returns the pid.
pub fn pid_of(file: &std::path::Path) -> u32 {
    let mut pid = 0;
    wait_until(
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(file)
                .ok()
                .filter(|t| t.ends_with('\n'))
                .and_then(|t| t.trim().parse().ok())
                .map(|p| pid = p)
                .is_some()
        },
        || format!("{} was never written", file.display()),
    );
    pid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_returns_once_done_holds() {
        let mut calls = 0;
        wait_until(
            Duration::from_secs(5),
            || {
                calls += 1;
                calls == 3
            },
            || "never",
        );
        assert_eq!(calls, 3);
    }

    #[test]
    #[should_panic(expected = "the marker never appeared")]
    fn it_fails_with_why_after_the_timeout() {
        wait_until(
            Duration::from_millis(120),
            || false,
            || "the marker never appeared",
        );
    }
}
