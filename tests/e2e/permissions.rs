//! Identity comes from the socket: members act only on their own jobs, and jobs run as their
//! submitter, with files owned by them.

use crate::pool::{
    Pool, ensure_user, ensure_user_in, has, have_root, read_line, read_output, s, stdout_of,
};
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

fn id_of(out: &std::process::Output) -> u64 {
    stdout_of(out).trim().parse().unwrap()
}

#[test]
fn members_cancel_only_their_own_jobs_which_run_as_them() {
    if !have_root("members_cancel_only_their_own_jobs_which_run_as_them") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let mut pool = Pool::new("2:t4").for_users();
    pool.start();

    let ping = String::from_utf8(pool.cli_as(alice, alice_gid, &["queue", "--me"]).stdout).unwrap();
    assert!(ping.starts_with("JOBID"), "{ping}");
    let id = id_of(&pool.cli_as(
        alice,
        alice_gid,
        &[
            "submit",
            "--parsable",
            "--gpus",
            "1",
            "--wrap",
            "id -un > whoami-$LABPOOL_JOB_ID; sleep 30",
        ],
    ));
    pool.wait_for(id, T, |j| s(j, "state") == "RUNNING");
    assert_eq!(s(&pool.job(id), "user"), "lp-alice");

    // Bob may not cancel it; the refusal says whose it is.
    let out = pool.cli_as(bob, bob_gid, &["cancel", &id.to_string()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "job {id} belongs to lp-alice; you (lp-bob) may cancel only your own jobs"
        )),
        "{err}"
    );
    assert_eq!(s(&pool.job(id), "state"), "RUNNING");

    // The job runs as alice, and what it writes is hers.
    let whoami = pool.work.join(format!("whoami-{id}"));
    // The shell creates the file before `id` fills it: wait for the whole line.
    assert_eq!(read_line(&whoami).trim(), "lp-alice");
    assert_eq!(std::fs::metadata(&whoami).unwrap().uid(), alice);
    let output = pool.work.join(format!("labpool-{id}.out"));
    assert_eq!(std::fs::metadata(&output).unwrap().uid(), alice);

    // Bob's own listing does not include alice's job; root (an admin) may cancel it.
    let bobs: Vec<serde_json::Value> = serde_json::from_slice(
        &pool
            .cli_as(bob, bob_gid, &["queue", "--me", "--json"])
            .stdout,
    )
    .unwrap();
    assert!(bobs.is_empty());
    pool.ok(&["cancel", &id.to_string()]);
    assert_eq!(s(&pool.wait_done(id, T), "state"), "CANCELLED");

    // A job cannot write where its user may not, even though the controller is root: the
    // submit refuses such a directory at once...
    let forbidden = pool.dir.join("state/stolen.out");
    let out = pool.cli_as(
        alice,
        alice_gid,
        &[
            "submit",
            "-o",
            forbidden.to_str().unwrap(),
            "--wrap",
            "echo should-not-run",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("you may not write in")
            && err.contains(&pool.dir.join("state").display().to_string()),
        "{err}"
    );
    // ...and a directory taken from its user between the submit and the start is refused
    // by the shim, which opens the output as the user.
    let taken = pool.work.join("alice-out");
    std::fs::create_dir(&taken).unwrap();
    std::os::unix::fs::chown(&taken, Some(alice), Some(alice_gid)).unwrap();
    let blocker = pool.submit(&["--wrap", "sleep 1"]);
    let forbidden = taken.join("stolen.out");
    let id = id_of(&pool.cli_as(
        alice,
        alice_gid,
        &[
            "submit",
            "--parsable",
            "--dependency",
            &format!("afterany:{blocker}"),
            "-o",
            forbidden.to_str().unwrap(),
            "--wrap",
            "echo should-not-run",
        ],
    ));
    std::os::unix::fs::chown(&taken, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&taken, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "FAILED");
    let detail = s(&job, "reason_detail");
    assert!(
        detail.contains("cannot open output file")
            && detail.contains("as lp-alice")
            && detail.contains("Permission denied"),
        "{detail}"
    );
    assert!(!forbidden.exists());
}

#[test]
fn controller_without_root_runs_only_its_own_users_jobs() {
    if !have_root("controller_without_root_runs_only_its_own_users_jobs") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let mut pool = Pool::new("1:t4").for_users();
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{alice}:{alice_gid}")])
        .arg(&pool.dir)
        .status()
        .unwrap();
    assert!(status.success());
    pool.start_as(Some((alice, alice_gid)));

    let id = id_of(&pool.cli_as(
        alice,
        alice_gid,
        &["submit", "--parsable", "--wrap", "id -un"],
    ));
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED");
    assert_eq!(
        read_output(&pool.work.join(format!("labpool-{id}.out"))).trim(),
        "lp-alice"
    );

    let out = pool.cli_as(bob, bob_gid, &["submit", "--wrap", "id -un"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("this controller runs as lp-alice, not root, so it runs only lp-alice's jobs"),
        "{err}"
    );
    assert!(err.contains("hint: run `labpool serve` as root"), "{err}");
    assert_eq!(pool.history().len(), 1);
}

#[test]
fn admin_group_members_may_cancel_any_job() {
    if !have_root("admin_group_members_may_cancel_any_job") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (admin, admin_gid) = ensure_user_in("lp-admin", Some("labpool-admins"));
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let id = id_of(&pool.cli_as(
        alice,
        alice_gid,
        &["submit", "--parsable", "--wrap", "sleep 30"],
    ));
    pool.wait_for(id, T, |j| s(j, "state") == "RUNNING");
    let out = stdout_of(&pool.cli_as(admin, admin_gid, &["cancel", &id.to_string()]));
    assert!(out.contains(&format!("job {id} is being stopped")), "{out}");
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "CANCELLED");
    assert_eq!(s(&job, "reason_detail"), "cancelled by lp-admin");
}

#[test]
fn members_may_not_change_accounts_limits_or_credits() {
    if !have_root("members_may_not_change_accounts_limits_or_credits") {
        return;
    }
    let (alice, gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    for (args, what) in [
        (
            vec!["account", "add", "mine"],
            "only admins may change accounts",
        ),
        (
            vec!["qos", "set", "--user", "lp-alice", "MaxJobsPerUser=100"],
            "only admins may set QOS limits",
        ),
        (
            vec!["credits", "grant", "lp-alice", "1000"],
            "only admins may grant credit",
        ),
    ] {
        let out = pool.cli_as(alice, gid, &args);
        assert!(!out.status.success());
        has(
            &String::from_utf8_lossy(&out.stderr),
            &[
                what,
                "you (lp-alice) are not root or in group labpool-admins",
            ],
        );
    }
    let list: Value = serde_json::from_str(&pool.ok(&["account", "list", "--json"])).unwrap();
    assert!(list["accounts"].as_array().unwrap().is_empty());
    assert!(list["user_limits"].as_array().unwrap().is_empty());
    // Members may read their own credits.
    let mine: Value =
        serde_json::from_slice(&pool.cli_as(alice, gid, &["credits", "--json"]).stdout).unwrap();
    assert_eq!(
        (mine["user"].as_str(), mine["balance"].as_f64()),
        (Some("lp-alice"), Some(1000.0))
    );
    // ... and only their own: root's ledger is root's and the admins'.
    let out = pool.cli_as(alice, gid, &["credits", "--user", "root"]);
    assert!(!out.status.success());
    has(
        &String::from_utf8_lossy(&out.stderr),
        &["only admins may see another user's credits (root)"],
    );
    let own = pool.cli_as(alice, gid, &["credits", "--user", "lp-alice", "--json"]);
    assert!(own.status.success());
    let theirs: Value =
        serde_json::from_str(&pool.ok(&["credits", "--user", "lp-alice", "--json"])).unwrap();
    assert_eq!(theirs["user"], "lp-alice");
}
