//! `labpool demo` runs end to end, shows GPUs contended for, and leaves nothing behind.

use std::process::Command;

#[test]
fn demo_runs_and_leaves_nothing_running() {
    let out = Command::new(crate::pool::bin())
        .arg("demo")
        .env("LABPOOL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for part in [
        "4 virtual GPUs",
        "PENDING",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "no GPU was ever held by two jobs at once",
        "Nothing is left running",
    ] {
        assert!(stdout.contains(part), "expected {part:?} in:\n{stdout}");
    }
    let dir = stdout
        .split_whitespace()
        .find(|w| w.starts_with("/tmp/labpool-demo-"))
        .expect("the demo names its directory");
    assert!(!std::path::Path::new(dir).exists(), "{dir} was not removed");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            assert!(
                !String::from_utf8_lossy(&cmdline).contains(dir),
                "a process from the demo is still running: {:?}",
                String::from_utf8_lossy(&cmdline)
            );
        }
    }
}
