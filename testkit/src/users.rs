//! The local users the tests run jobs as (`lp-alice`, `lp-bob`, `lp-admin`, …): made when
//! missing, with `useradd` and `groupadd`, which need root (callers check for it first).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Makes sure a local test user exists (no home directory); returns (uid, gid).
pub fn ensure_user(name: &str) -> (u32, u32) {
    ensure(name, None, None)
}

/// Makes sure a local test user exists, as a member of `group` when given (the group is
/// created too); returns (uid, gid).
pub fn ensure_user_in(name: &str, group: Option<&str>) -> (u32, u32) {
    ensure(name, group, None)
}

/// Makes sure a local test user exists whose home directory is `home` (the directory itself
/// is the caller's to make); returns (uid, gid). A user that exists with another home fails
/// the test.
pub fn ensure_user_with_home(name: &str, home: &Path) -> (u32, u32) {
    let ids = ensure(name, None, Some(home));
    let user = nix::unistd::User::from_name(name).ok().flatten();
    let dir = user.map(|u| u.dir);
    assert_eq!(dir.as_deref(), Some(home), "{name} has another home");
    ids
}

fn ensure(name: &str, group: Option<&str>, home: Option<&Path>) -> (u32, u32) {
    for _ in 0..50 {
        if let Some(g) = group
            && nix::unistd::Group::from_name(g).ok().flatten().is_none()
        {
            let _ = Command::new("groupadd")
                .args(["-f", g])
                .stderr(Stdio::null())
                .status();
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        if let Ok(Some(u)) = nix::unistd::User::from_name(name) {
            return (u.uid.as_raw(), u.gid.as_raw());
        }
        // useradd locks /etc/passwd; a parallel test may hold it for a moment.
        let mut add = Command::new("useradd");
        add.args(["-M", "-s", "/bin/sh"]);
        if let Some(g) = group {
            add.args(["-G", g]);
        }
        if let Some(h) = home {
            add.arg("-d").arg(h);
        }
        let _ = add.arg(name).stderr(Stdio::null()).status();
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("cannot create test user {name} (are useradd and groupadd installed?)");
}
