//! SIGHUP (`systemctl reload labpool`): the controller reads its config again. A longer limit
//! admits a job the old one refused, without a restart; a section that waits for a restart is
//! named with why; a file that does not load, or that takes away a partition still holding
//! jobs, changes nothing and the log says why.

use crate::pool::{Pool, have_root, wait_until};
use std::time::Duration;

fn hangup(pool: &Pool) {
    let pid = nix::unistd::Pid::from_raw(pool.pid().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
}

/// Waits until the controller's log holds `n` lines with `part`.
fn wait_log(pool: &Pool, part: &str, n: usize) {
    wait_until(
        Duration::from_secs(10),
        || pool.serve_log().matches(part).count() >= n,
        || format!("{part:?} not logged {n} times:\n{}", pool.serve_log()),
    );
}

#[test]
fn a_hangup_reloads_the_scheduling_policy_and_names_what_waits_for_a_restart() {
    if !have_root("a_hangup_reloads_the_scheduling_policy_and_names_what_waits_for_a_restart") {
        return;
    }
    let mut pool = Pool::new("1:t4");
    pool.start();
    let two_hours = [
        "--partition",
        "debug",
        "--time",
        "2:00:00",
        "--hold",
        "--wrap",
        "true",
    ];
    let refused = pool.cli(&[&["submit"][..], &two_hours].concat());
    assert!(!refused.status.success(), "debug took a 2 h job at 1 h");

    pool.edit_config(|t| {
        t.replacen("max_time = \"1:00:00\"", "max_time = \"3:00:00\"", 1)
            .replacen(
                "[web]\nlisten = \"127.0.0.1:0\"",
                "[web]\nlisten = \"off\"",
                1,
            )
    });
    hangup(&pool);
    wait_log(&pool, "config reload: took [partition]", 1);
    let log = pool.serve_log();
    assert!(
        log.contains("[web] changed in")
            && log.contains("takes effect at the next restart, as its listener is bound at start"),
        "{log}"
    );
    let held = pool.submit(&two_hours);
    let listed = pool.ok(&["partition", "list", "--json"]);
    assert!(listed.contains("10800"), "{listed}");

    // A file that does not load changes nothing.
    pool.edit_config(|t| t + "\n[[[not toml\n");
    hangup(&pool);
    wait_log(&pool, "kept the running config, as", 1);
    pool.edit_config(|t| t.replace("\n[[[not toml\n", ""));

    // Taking away the partition that holds the held job changes nothing either.
    pool.edit_config(|t| t.replacen("name = \"debug\"", "name = \"tryout\"", 1));
    hangup(&pool);
    wait_log(&pool, "kept the running config:", 1);
    let log = pool.serve_log();
    assert!(
        log.contains(&format!(
            "partition 'debug' is removed from the config but still holds jobs {held}"
        )),
        "{log}"
    );
    let listed = pool.ok(&["partition", "list"]);
    assert!(
        listed.contains("debug") && !listed.contains("tryout"),
        "{listed}"
    );
    assert!(pool.cli(&["queue"]).status.success());
}
