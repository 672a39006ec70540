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
    // Read in the order printed, no GPU is taken while another job holds it, and every job
    // that ended after running was shown running first.
    let mut holder: std::collections::BTreeMap<String, u64> = Default::default();
    let mut ran = std::collections::BTreeSet::new();
    for line in stdout.lines().filter(|l| l.starts_with('[')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let job: u64 = words[words.iter().position(|w| *w == "job").unwrap() + 1]
            .parse()
            .unwrap();
        if line.contains(" RUNNING ") {
            ran.insert(job);
            let gpus = line.rsplit("runs on GPU ").next().unwrap();
            for g in gpus.split(',') {
                if let Some(other) = holder.insert(g.to_string(), job) {
                    panic!("job {job} runs on GPU {g} before job {other} let it go:\n{stdout}");
                }
            }
        } else if [" COMPLETED ", " FAILED ", " TIMEOUT "]
            .iter()
            .any(|s| line.contains(s))
        {
            assert!(
                ran.contains(&job),
                "job {job} ended, never shown running:\n{stdout}"
            );
            holder.retain(|_, j| *j != job);
        }
    }
    assert_eq!(ran.len(), 7, "{stdout}");
    assert!(stdout.contains("GPU INDEXES"), "{stdout}");
    // The binary is not on PATH here: the next step names it by its path, from here when it
    // lies below (as after `cargo run`).
    let bin = std::fs::canonicalize(crate::pool::bin()).unwrap();
    let here = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
    let path = match bin.strip_prefix(&here) {
        Ok(rel) => format!("./{}", rel.display()),
        Err(_) => bin.display().to_string(),
    };
    let next = format!("Next: `{path} init --dir DIR`");
    assert!(stdout.contains(&next), "expected {next:?} in:\n{stdout}");
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
