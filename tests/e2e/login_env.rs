//! `--get-user-env` runs the member's own login scripts, so they run inside the job and
//! nowhere else, as the attack tried: a process the profile starts (and moves out of its
//! process group, ignoring TERM) is the job's (its cgroup, its key, no signals blocked) and
//! ends with it; a profile that hangs is stopped at the timeout with what it started; one that
//! prints 300 MB costs the node's root shim no more than a bounded read.

use crate::pool::{Pool, have_root, read_line, read_output, runs, s, wait_until};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// A test user whose home holds a login profile: (uid, gid, home).
fn user_with_home(name: &str) -> (u32, u32, PathBuf) {
    let home = PathBuf::from(format!("/var/tmp/labpool-test-home-{name}"));
    let (uid, gid) = labpool_testkit::users::ensure_user_with_home(name, &home);
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    (uid, gid, home)
}

const PROFILE: &str = r#"
case "$(cat "$HOME/mode" 2>/dev/null)" in
  escape) setsid sh -c 'trap "" TERM INT HUP; echo $$ > "$HOME/escaped.pid"; exec sleep 300' > /dev/null 2>&1 &
    # Until it has left the shell's process group (which ends with the shell), under load too.
    while [ ! -s "$HOME/escaped.pid" ]; do sleep 0.05; done ;;
  hang) echo $$ > "$HOME/hung.pid"; sleep 300 ;;
  flood) head -c 300000000 /dev/zero | tr '\0' x ;;
esac
export FROM_PROFILE=yes
"#;

fn write_as(path: &Path, text: &str, uid: u32, gid: u32) {
    std::fs::write(path, text).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
}

fn pid_in(path: &Path) -> i32 {
    read_line(path).trim().parse().unwrap()
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn proc_file(pid: i32, name: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/{name}")).unwrap_or_default())
        .into_owned()
}

fn wait_gone(pid: i32, what: &str) {
    wait_until(
        T,
        || !runs(pid),
        || format!("{what} (pid {pid}) outlived the job"),
    );
}

#[test]
fn a_login_profile_runs_inside_the_job_and_no_longer_than_it() {
    if !have_root("a_login_profile_runs_inside_the_job_and_no_longer_than_it") {
        return;
    }
    let (uid, gid, home) = user_with_home("lp-carol");
    for f in ["escaped.pid", "hung.pid"] {
        let _ = std::fs::remove_file(home.join(f));
    }
    write_as(&home.join(".profile"), PROFILE, uid, gid);
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let submit = |timeout: &str, script: &str| -> u64 {
        let out = pool.cli_as(
            uid,
            gid,
            &[
                "submit",
                "--parsable",
                &format!("--get-user-env={timeout}"),
                "--wrap",
                script,
            ],
        );
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };

    // A process the profile sends away runs inside the job, and ends with it.
    write_as(&home.join("mode"), "escape", uid, gid);
    let go = pool.work.join("go");
    let job = submit(
        "10",
        &format!(
            "echo $$ > job.pid; echo \"profile=$FROM_PROFILE\"; while [ ! -e {} ]; do sleep 0.1; done",
            go.display()
        ),
    );
    let script = pid_in(&pool.work.join("job.pid"));
    let escaped = pid_in(&home.join("escaped.pid"));
    assert!(alive(escaped));
    let status = proc_file(escaped, "status");
    let blocked = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
    assert!(
        blocked.ends_with("0000000000000000"),
        "the profile's process has signals blocked: {blocked}"
    );
    assert!(
        proc_file(escaped, "environ").contains("LABPOOL_JOB_KEY="),
        "the profile's process does not carry the job's key"
    );
    assert_eq!(
        proc_file(escaped, "cgroup"),
        proc_file(script, "cgroup"),
        "the profile's process is not in the job's cgroups"
    );
    std::fs::write(&go, "").unwrap();
    let done = pool.wait_done(job, T);
    assert_eq!(s(&done, "state"), "COMPLETED", "{done:#}");
    let out = read_output(&pool.work.join(format!("labpool-{job}.out")));
    assert!(out.contains("profile=yes"), "{out}");
    wait_gone(escaped, "the profile's process");

    // A profile that hangs is stopped at the timeout, with what it started.
    write_as(&home.join("mode"), "hang", uid, gid);
    let hung = submit("2", "echo \"profile=[$FROM_PROFILE]\"");
    let done = pool.wait_done(hung, T);
    assert_eq!(s(&done, "state"), "COMPLETED", "{done:#}");
    let out = read_output(&pool.work.join(format!("labpool-{hung}.out")));
    assert!(out.contains("did not finish in 2s"), "{out}");
    assert!(out.contains("profile=[]"), "{out}");
    wait_gone(pid_in(&home.join("hung.pid")), "the hung login shell");

    // A profile that prints 300 MB: read no further than a bound, by a shim that stays small.
    write_as(&home.join("mode"), "flood", uid, gid);
    let go = pool.work.join("go-flood");
    let flood = submit(
        "20",
        &format!(
            "touch flooded; while [ ! -e {} ]; do sleep 0.1; done",
            go.display()
        ),
    );
    wait_until(
        T,
        || pool.work.join("flooded").exists(),
        || "the flooded job never ran",
    );
    let lock = pool.dir.join(format!("state/spool/jobs/{flood}.1/lock"));
    let shim: i32 = std::fs::read_to_string(&lock)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let hwm = proc_file(shim, "status")
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap();
    assert!(
        hwm < 64 << 10,
        "the shim grew to {hwm} kB reading the profile"
    );
    std::fs::write(&go, "").unwrap();
    let done = pool.wait_done(flood, T);
    assert_eq!(s(&done, "state"), "COMPLETED", "{done:#}");
    let out = read_output(&pool.work.join(format!("labpool-{flood}.out")));
    assert!(out.contains("printed more than 4"), "{out}");

    pool.stop();
}
