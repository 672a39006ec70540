//! Idle is measured on the GPU: a session whose GPU computes while nobody types runs on; once
//! its GPU falls quiet it is told on its terminal, taken back when its member types, told again,
//! and stopped after the grace, its GPU freed and its record saying why. The fake NVML's
//! scripted utilisation plays the GPU.

use crate::interactive::{Terminal, free_gpus};
use crate::pool::{Pool, s};
use std::path::Path;
use std::time::{Duration, Instant};

/// A started pool on the fake NVML in `build` (one RTX 4090 at `util`% utilisation), sampled
/// every 200 ms, whose sessions are idle after 3 s and stopped 2 s after they are told; None
/// without gcc.
fn nvml_pool(test: &str, build: &Path, util: u32) -> Option<Pool> {
    nvml_pool_with(test, build, &format!("count 1\nutil 0 {util} 0\n"), |t| t)
}

/// [`nvml_pool`] with the fake NVML's `script`, its config changed by `more` before it starts.
pub fn nvml_pool_with(
    test: &str,
    build: &Path,
    script: &str,
    more: impl FnOnce(String) -> String,
) -> Option<Pool> {
    crate::nvml::fake_nvml_pool(test, build, script, |t| {
        let t = t.replace(
            "[jobs]\n",
            "[jobs]\ninteractive_idle = \"3s\"\nidle_grace = \"2s\"\n",
        );
        assert!(t.contains("idle_grace"), "the config has a [jobs] section");
        more(t)
    })
}

#[test]
fn a_session_computing_in_silence_runs_on_and_a_quiet_one_is_told_then_stopped() {
    let build = tempfile::tempdir().unwrap();
    let Some(pool) = nvml_pool("a_session_computing_in_silence", build.path(), 97) else {
        return;
    };
    let mut term = Terminal::open(&pool, &["run", "--pty", "-G", "1", "bash", "--norc"]);
    term.expect("$ ");
    term.type_line("echo started");
    term.expect("started");
    // Nobody types for twice the idle limit, but the GPU computes: it runs on, untold.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(s(&pool.job(1), "state"), "RUNNING");
    assert!(!term.text().contains("idle"), "{}", term.text());

    // The GPU falls quiet: told, on the terminal.
    crate::nvml::script(build.path(), "count 1\nutil 0 1 0\n");
    let quiet = Instant::now();
    term.expect(
        "this session has been idle (no input and its GPUs under 5% for 3s); it stops in 2s",
    );
    assert!(
        quiet.elapsed() >= Duration::from_secs(2),
        "told after {:?}",
        quiet.elapsed()
    );
    // Its member types: taken back.
    term.type_line("echo here");
    term.expect("this session is busy again; it is no longer stopped");
    // Quiet again: told again, then stopped.
    term.expect_times("this session has been idle", 2);
    term.expect("was stopped by the idle rule: no input and its GPUs under 5% for");
    term.exit_code();
    let job = pool.wait_done(1, Duration::from_secs(30));
    assert_eq!(s(&job, "state"), "CANCELLED", "{job:#}");
    let shown = pool.ok(&["show", "1"]);
    for event in ["IDLE_WARNING", "IDLE_CLEARED", "IDLE_STOPPED"] {
        assert!(shown.contains(event), "{event} missing:\n{shown}");
    }
    assert_eq!(free_gpus(&pool), 1);
}
