//! `--show-settings` (hidden) prints the resolved config, with defaults filled in, paths made
//! absolute and every check passed, and does nothing else. The output is compared with
//! `tests/e2e/snapshots/show_settings.txt`, so a changed default fails here. After a change
//! made on purpose, run the test with `LABPOOL_UPDATE_SNAPSHOTS=1` to rewrite the file, and
//! review its diff.

use crate::pool::bin;
use std::process::Command;

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/e2e/snapshots/show_settings.txt"
);

#[test]
fn show_settings_prints_the_resolved_config_and_does_nothing_else() {
    let tmp = tempfile::Builder::new()
        .prefix("lp-")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = tmp.path();
    let out = Command::new(bin())
        .args(["init", "--virtual-gpus", "2:rtx4090", "--dir"])
        .arg(dir)
        .arg("--home-root")
        .arg(dir.join("shared/home"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "init failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = dir.join("labpool.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, same_on_every_machine(&text)).unwrap();

    // No controller runs: had `submit` run, it would have failed to reach one.
    let out = Command::new(bin())
        .arg("--config")
        .arg(&config)
        .args(["--show-settings", "submit", "--wrap", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "--show-settings failed: {stderr}");
    assert_eq!(stderr, "", "--show-settings wrote to standard error");
    assert!(
        !dir.join("state").exists(),
        "--show-settings made the state directory"
    );
    let shown = String::from_utf8(out.stdout)
        .unwrap()
        .replace(dir.to_str().unwrap(), "[DIR]");
    let _: serde_json::Value = serde_json::from_str(&shown).expect("--show-settings prints JSON");
    check_snapshot(&shown);
}

/// The config with `labpool init`'s guesses about this machine (host name, cores, memory)
/// replaced by fixed values.
fn same_on_every_machine(text: &str) -> String {
    let mut section = "";
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with('[') {
            section = line;
        }
        let line = match section {
            "[node]" if line.starts_with("name = ") => "name = \"node1\"",
            "[node]" if line.starts_with("cpus = ") => "cpus = 16",
            "[node]" if line.starts_with("memory = ") => "memory = \"64G\"",
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn check_snapshot(shown: &str) {
    crate::pool::check_snapshot(SNAPSHOT, "--show-settings", shown);
}
