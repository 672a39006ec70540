//! The controller's own state, backed up while it runs and restored after its database is
//! gone: a member's job is in the history again, with its account and ledger. A plain copy of
//! `labpool.db` while the controller runs would have missed what its write-ahead log held.

use crate::pool::{Pool, ensure_user, fails, have_root, stdout_of};
use std::time::Duration;

#[test]
fn a_backup_taken_while_running_restores_the_history_after_the_database_is_lost() {
    if !have_root("a_backup_taken_while_running_restores_the_history_after_the_database_is_lost") {
        return;
    }
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let done = pool.submit(&["--job-name", "before-the-loss", "--wrap", "true"]);
    pool.wait_done(done, Duration::from_secs(20));
    let queued = pool.submit(&["--hold", "--wrap", "true"]);

    // Members may not take the pool's state.
    let (uid, gid) = ensure_user("lp-alice");
    let out = pool.cli_as(uid, gid, &["state", "backup"]);
    assert!(!out.status.success(), "a member backed up the state");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("labpool-admins"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let backup = pool.dir.join("off-box");
    let said = pool.ok(&["state", "backup", "--to", backup.to_str().unwrap()]);
    assert!(said.contains("backed up 2 jobs"), "{said}");
    for (file, mode) in [
        ("labpool.db", 0o600),
        ("labpool.toml", 0o600),
        ("cluster.key", 0o600),
    ] {
        let meta = std::fs::metadata(backup.join(file)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, mode, "{file}");
    }

    // A restore refuses while the controller runs.
    let (_, err) = fails(&pool, &["state", "restore", backup.to_str().unwrap()]);
    assert!(err.contains("is running: stop it first"), "{err}");

    // The disk with the state is lost.
    pool.stop();
    for f in ["labpool.db", "labpool.db-wal", "labpool.db-shm"] {
        let _ = std::fs::remove_file(pool.dir.join("state").join(f));
    }
    let restored = pool.ok(&["state", "restore", backup.to_str().unwrap()]);
    assert!(restored.contains("restored 2 jobs"), "{restored}");
    let (_, err) = fails(&pool, &["state", "restore", backup.to_str().unwrap()]);
    assert!(err.contains("pass --force"), "{err}");

    pool.start();
    let history = stdout_of(&pool.cli(&["history", "--json"]));
    assert!(history.contains("before-the-loss"), "{history}");
    let j = pool.job(queued);
    assert_eq!(j["state"], "PENDING", "{j}");
    pool.ok(&["release", &queued.to_string()]);
    pool.wait_done(queued, Duration::from_secs(20));
}
