//! Held jobs and `--begin`: a held job waits, whatever is free, until its owner (or an admin)
//! releases it; an admin's hold is released only by an admin; a job with a begin time starts
//! at that time, not at the next periodic pass.

use crate::pool::{Pool, ensure_user, ensure_user_in, has, have_root, s, stdout_of};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

#[test]
fn a_held_job_waits_until_released_and_the_queue_says_why() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let id = pool.submit(&["--hold", "--wrap", "echo ran"]);
    // The GPU is free all along; the hold alone keeps it waiting.
    let job = pool.wait_for(id, T, |j| j["reason"] == "JobHeldUser");
    assert_eq!(s(&job, "state"), "PENDING");
    has(
        s(&job, "reason_detail"),
        &[&format!("`labpool release {id}` lets it run")],
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(s(&pool.job(id), "state"), "PENDING");
    let queue = pool.ok(&["queue"]);
    has(&queue, &["JobHeldUser"]);
    // The hold is kept on disk: a restarted controller still holds the job.
    pool.stop();
    pool.start();
    std::thread::sleep(Duration::from_millis(1000));
    let job = pool.job(id);
    assert_eq!(s(&job, "state"), "PENDING", "{job:#}");
    assert_eq!(s(&job, "reason"), "JobHeldUser", "{job:#}");

    let out = pool.ok(&["release", &id.to_string()]);
    has(&out, &[&format!("job {id} released")]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "COMPLETED", "{job:#}");
    let show = pool.ok(&["show", &id.to_string()]);
    let me = whoami();
    has(
        &show,
        &[
            &format!("held by {me}"),
            "release",
            &format!("released by {me}"),
        ],
    );

    // A second release, or a hold on a finished job, changes nothing and says why.
    let out = pool.cli(&["release", &id.to_string()]);
    assert!(!out.status.success());
    has(
        &String::from_utf8_lossy(&out.stderr),
        &[
            &format!("job {id} already ended (COMPLETED)"),
            "1 of 1 jobs not released",
        ],
    );
}

#[test]
fn labpool_hold_stops_a_waiting_job_and_not_a_running_one() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let running = pool.submit(&["--gpus", "1", "--wrap", "sleep 30"]);
    pool.wait_for(running, T, |j| s(j, "state") == "RUNNING");
    let waiting = pool.submit(&["--gpus", "1", "--wrap", "echo second"]);
    let out = pool.ok(&["hold", &waiting.to_string()]);
    has(&out, &[&format!("job {waiting} held")]);
    let out = pool.cli(&["hold", &running.to_string()]);
    assert!(!out.status.success());
    has(
        &String::from_utf8_lossy(&out.stderr),
        &[&format!(
            "job {running} is RUNNING; only a waiting job can be held"
        )],
    );
    // The GPU frees; the held job still waits.
    pool.ok(&["cancel", &running.to_string()]);
    pool.wait_done(running, T);
    std::thread::sleep(Duration::from_secs(2));
    let job = pool.job(waiting);
    assert_eq!(s(&job, "state"), "PENDING", "{job:#}");
    assert_eq!(s(&job, "reason"), "JobHeldUser");
    pool.ok(&["release", &waiting.to_string()]);
    assert_eq!(s(&pool.wait_done(waiting, T), "state"), "COMPLETED");
}

#[test]
fn begin_delays_the_start_to_that_time() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let t0 = Instant::now();
    let id = pool.submit(&["--begin", "now+4", "--wrap", "echo late"]);
    let job = pool.wait_for(id, T, |j| j["reason"].is_string());
    assert_eq!(s(&job, "state"), "PENDING");
    assert_eq!(s(&job, "reason"), "BeginTime", "{job:#}");
    assert!(job["begin_time"].is_string(), "{job:#}");
    has(&pool.ok(&["show", &id.to_string()]), &["not before"]);
    let job = pool.wait_for(id, T, |j| s(j, "state") != "PENDING");
    let waited = t0.elapsed();
    // It starts at its time (the periodic pass is 30 s away), and not before.
    assert!(
        waited >= Duration::from_millis(3500) && waited < Duration::from_secs(12),
        "started after {waited:?}: {job:#}"
    );
    assert_eq!(s(&pool.wait_done(id, T), "state"), "COMPLETED");

    let out = pool.cli(&[
        "submit", "--begin", "someday", "--time", "soon", "--wrap", "true",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // Both problems at once.
    has(
        &err,
        &[
            "2 problems",
            "--begin \"someday\" is not a time",
            "--time: invalid time 'soon'",
        ],
    );
}

#[test]
fn only_an_admin_releases_an_admins_hold() {
    if !have_root("only_an_admin_releases_an_admins_hold") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let (admin, admin_gid) = ensure_user_in("lp-admin", Some("labpool-admins"));
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let out = pool.cli_as(
        alice,
        alice_gid,
        &[
            "submit",
            "--parsable",
            "--begin",
            "now+600",
            "--wrap",
            "true",
        ],
    );
    let id: u64 = stdout_of(&out).trim().parse().unwrap();
    let job = id.to_string();

    let out = pool.cli_as(bob, bob_gid, &["hold", &job]);
    assert!(!out.status.success());
    has(
        &String::from_utf8_lossy(&out.stderr),
        &[&format!(
            "job {id} belongs to lp-alice; you (lp-bob) may hold and release only your own jobs"
        )],
    );
    has(
        &stdout_of(&pool.cli_as(admin, admin_gid, &["hold", &job])),
        &["held"],
    );
    let held = pool.wait_for(id, T, |j| j["reason"] == "JobHeldAdmin");
    has(s(&held, "reason_detail"), &["held by an admin"]);

    let out = pool.cli_as(alice, alice_gid, &["release", &job]);
    assert!(!out.status.success());
    has(
        &String::from_utf8_lossy(&out.stderr),
        &[&format!(
            "job {id} was held by the admin lp-admin; only an admin can release it"
        )],
    );
    assert_eq!(s(&pool.job(id), "reason"), "JobHeldAdmin");
    has(
        &stdout_of(&pool.cli_as(admin, admin_gid, &["release", &job])),
        &["released"],
    );
    pool.wait_for(id, T, |j| j["reason"] == "BeginTime");
}

fn whoami() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name
}

#[test]
fn a_job_that_can_no_longer_meet_its_deadline_ends_deadline_unstarted() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let busy = pool.submit(&["--gpus", "1", "--wrap", "sleep 60"]);
    pool.wait_for(busy, T, |j| s(j, "state") == "RUNNING");
    // A minute of work due in 64 s: it must start within 4 s, and the GPU stays busy.
    let t0 = Instant::now();
    let id = pool.submit(&[
        "--gpus",
        "1",
        "-t",
        "1",
        "--deadline",
        "now+64",
        "--wrap",
        "true",
    ]);
    let job = pool.wait_done(id, T);
    assert_eq!(s(&job, "state"), "DEADLINE", "{job:#}");
    assert!(job["start_time"].is_null());
    has(
        s(&job, "reason_detail"),
        &["no longer fits before its --deadline"],
    );
    // Expired when it no longer fit, not at the 30 s tick.
    assert!(t0.elapsed() < Duration::from_secs(12), "{:?}", t0.elapsed());
    // One that could never make it is refused at submit.
    let err = crate::pool::fails_stderr(
        &pool,
        &[
            "submit",
            "-t",
            "10",
            "--deadline",
            "now+60",
            "--wrap",
            "true",
        ],
    );
    has(
        &err,
        &[
            "cannot end by then",
            "hint: give a later --deadline or a shorter --time",
        ],
    );
    pool.ok(&["cancel", &busy.to_string()]);
}
