//! `--show-settings` (hidden) prints the resolved config, with defaults filled in, paths made
//! absolute and every check passed, and does nothing else. The output is held in the snapshot
//! `tests/e2e/shown/show_settings.snap`, so a changed default fails here (see
//! [`crate::shown`] for how to accept a change made on purpose).

use crate::pool::bin;
use crate::shown::{assert_shown, same_on_every_machine};
use std::process::Command;

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
    let shown = String::from_utf8(out.stdout).unwrap();
    let _: serde_json::Value = serde_json::from_str(&shown).expect("--show-settings prints JSON");
    assert_shown("show_settings", dir, &shown);
}
