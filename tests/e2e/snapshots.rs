//! Snapshots through the real binary: members find and restore their own deleted files through
//! the controller (and nothing else), backups killed with SIGKILL leave a sound repository,
//! scheduled backups apply retention, and bad input changes nothing.

use crate::pool::{Pool, bytes, ensure_user, fails_stderr, has, have_root, stdout_of};
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn home(pool: &Pool) -> PathBuf {
    pool.dir.join("shared/home")
}

fn chown_r(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
    if p.is_dir() && !p.is_symlink() {
        for e in std::fs::read_dir(p).unwrap() {
            chown_r(&e.unwrap().path(), uid, gid);
        }
    }
}

#[test]
fn a_member_finds_and_restores_their_own_deleted_files_and_nobody_elses() {
    if !have_root("a_member_finds_and_restores_their_own_deleted_files_and_nobody_elses") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let mut pool = Pool::new("1:t4").for_users();
    let h = home(&pool);
    let a = h.join("lp-alice");
    std::fs::create_dir_all(a.join("thesis/figs")).unwrap();
    std::fs::write(a.join("thesis/main.tex"), "\\documentclass{article}").unwrap();
    std::fs::write(a.join("thesis/figs/loss.png"), vec![7u8; 300_000]).unwrap();
    std::fs::write(a.join("notes.md"), "monday's notes").unwrap();
    std::fs::set_permissions(a.join("notes.md"), std::fs::Permissions::from_mode(0o640)).unwrap();
    chown_r(&a, alice, alice_gid);
    let b = h.join("lp-bob");
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("secret.txt"), "bob's").unwrap();
    chown_r(&b, bob, bob_gid);
    std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o700)).unwrap();
    pool.start();

    let notes = a.join("notes.md");
    let notes_meta = std::fs::metadata(&notes).unwrap();
    let first = json(&pool.ok(&["snapshot", "create", "--source", "home", "--json"]));
    let first_id = first[0]["id"].as_str().unwrap().to_string();
    assert_eq!(first[0]["files"], 4);

    // Alice deletes her notes and her thesis; the next night's backup no longer has them.
    std::fs::remove_file(&notes).unwrap();
    std::fs::remove_dir_all(a.join("thesis")).unwrap();
    pool.ok(&["snapshot", "create", "--source", "home"]);

    let as_alice = |args: &[&str]| pool.cli_as(alice, alice_gid, args);
    let notes_s = notes.to_str().unwrap();
    let f = json(&stdout_of(&as_alice(&[
        "snapshot", "find", notes_s, "--json",
    ])));
    assert_eq!(f["last_seen"], first_id.as_str());
    assert!(f["gone_in"].is_string());
    let text = stdout_of(&as_alice(&["snapshot", "find", notes_s]));
    has(&text, &["deleted between them", "snapshot restore"]);

    // Back in place, as it was: content, mode, owner, mtime.
    let out = as_alice(&["snapshot", "restore", notes_s, "--at", &first_id[..8]]);
    let text = stdout_of(&out);
    has(
        &text,
        &[
            "restored",
            &first_id[..8],
            ": 1 file, 0 directories, 0 other, ",
        ],
    );
    let back = std::fs::metadata(&notes).unwrap();
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "monday's notes");
    assert_eq!(
        (back.uid(), back.gid(), back.mode() & 0o7777),
        (alice, alice_gid, 0o640)
    );
    assert_eq!(
        (back.mtime(), back.mtime_nsec()),
        (notes_meta.mtime(), notes_meta.mtime_nsec())
    );

    // Again: it exists now, so labpool says so and suggests --target.
    let out = as_alice(&["snapshot", "restore", notes_s]);
    assert!(!out.status.success());
    has(&stderr(&out), &["exists", "--target"]);

    // The whole directory, by date, into a directory of hers.
    let target = pool.dir.join("alice-restore");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::chown(&target, Some(alice), Some(alice_gid)).unwrap();
    let thesis = a.join("thesis");
    let out = as_alice(&[
        "snapshot",
        "restore",
        thesis.to_str().unwrap(),
        "--at",
        "2000-01-01",
        "--target",
        target.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "no snapshot is that old");
    has(&stderr(&out), &["is not in snapshot", "try --at"]);
    // By date: the newest state up to today that has it (it is gone from today's newest).
    let today = chrono::Local::now().format("%Y-%m-%d").to_string();
    let out = as_alice(&[
        "snapshot",
        "restore",
        thesis.to_str().unwrap(),
        "--at",
        &today,
        "--target",
        target.to_str().unwrap(),
        "--json",
    ]);
    let r = json(&stdout_of(&out));
    assert_eq!(r["files"], 2);
    assert_eq!(
        std::fs::read(target.join("thesis/figs/loss.png")).unwrap(),
        vec![7u8; 300_000]
    );
    assert_eq!(
        std::fs::metadata(target.join("thesis/figs")).unwrap().uid(),
        alice
    );

    // Bob's files: invisible to alice, and not hers to restore, even into her own directory.
    let listing = json(&stdout_of(&as_alice(&[
        "snapshot",
        "ls",
        "latest",
        h.to_str().unwrap(),
        "--json",
    ])));
    let paths: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec![a.to_str().unwrap()]);
    let secret = b.join("secret.txt");
    let out = as_alice(&[
        "snapshot",
        "restore",
        secret.to_str().unwrap(),
        "--target",
        target.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    has(
        &stderr(&out),
        &["no snapshot holds it (or it was not yours)"],
    );
    assert!(!target.join("secret.txt").exists());
    // Found in none of the snapshots that cover it: said so, and the exit status says it too.
    let out = as_alice(&["snapshot", "find", secret.to_str().unwrap(), "--json"]);
    assert!(!out.status.success(), "{out:?}");
    let f = json(&String::from_utf8_lossy(&out.stdout));
    assert!(f["last_seen"].is_null());
    has(&stderr(&out), &["is in none of the", "nothing to restore"]);
    // Nor may she write into bob's directory, or anywhere not hers.
    let out = as_alice(&[
        "snapshot", "restore", notes_s, "--at", &first_id, "--target", "/tmp",
    ]);
    assert!(!out.status.success());
    has(&stderr(&out), &["belongs to uid 0, not to you"]);
    // Bob sees his own file; an admin (root) sees everything.
    let out = pool.cli_as(
        bob,
        bob_gid,
        &["snapshot", "ls", "latest", b.to_str().unwrap(), "--json"],
    );
    assert_eq!(json(&stdout_of(&out)).as_array().unwrap().len(), 1);
    let all = json(&pool.ok(&[
        "snapshot",
        "ls",
        "latest",
        h.to_str().unwrap(),
        "--recursive",
        "--json",
    ]));
    assert!(all.as_array().unwrap().len() >= 3, "{all}");

    // Members may not run admin maintenance.
    let out = as_alice(&["snapshot", "prune"]);
    assert!(!out.status.success());
    has(&stderr(&out), &["this command is for admins", "sudo"]);

    // A raw request with `..` in the path is refused by the controller, whoever asks.
    let resp = raw_post(
        &pool,
        "/v1/snapshots/restore",
        &format!(
            r#"{{"path":"{}/../lp-bob/secret.txt","target":"{}"}}"#,
            a.display(),
            target.display()
        ),
    );
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    assert!(resp.contains("without `..`"), "{resp}");
}

fn raw_post(pool: &Pool, path: &str, body: &str) -> String {
    let mut sock = std::os::unix::net::UnixStream::connect(pool.dir.join("labpool.sock")).unwrap();
    write!(sock, "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut resp = String::new();
    sock.read_to_string(&mut resp).unwrap();
    resp
}

#[test]
fn backups_killed_at_random_points_leave_a_repository_that_checks_and_restores() {
    let mut pool = Pool::new("1:t4");
    let src = pool.dir.join("data");
    for d in 0..20 {
        let dir = src.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..40 {
            std::fs::write(
                dir.join(format!("f{f}.txt")),
                format!("file {d}/{f}\n").repeat(50 + f),
            )
            .unwrap();
        }
    }
    for i in 0..3 {
        std::fs::write(src.join(format!("shard{i}.bin")), bytes(i, 40 << 20)).unwrap();
    }
    let src_s = src.to_str().unwrap();
    // Several kill points: early (walking), mid-pack, between packs, near the commit.
    let mut killed = 0;
    for (seed, delay_ms) in [(1u64, 30u64), (2, 150), (3, 400), (4, 800)] {
        let mut child = pool
            .command(&["snapshot", "create", "--path", src_s])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms + seed * 7));
        let _ = child.kill();
        if std::os::unix::process::ExitStatusExt::signal(&child.wait().unwrap()) == Some(9) {
            killed += 1;
        }
        let check = pool.cli(&["snapshot", "check", "--json"]);
        let report = json(&String::from_utf8_lossy(&check.stdout));
        assert!(
            check.status.success(),
            "check after a kill at {delay_ms} ms: {report}\n{}",
            stderr(&check)
        );
    }
    assert!(
        killed >= 3,
        "only {killed} of 4 backups were still running when killed"
    );
    // The next backup runs normally and reuses what the killed ones stored.
    let made = json(&pool.ok(&["snapshot", "create", "--path", src_s, "--json"]));
    assert_eq!(made[0]["files"], 803);
    assert!(
        made[0]["added_bytes"].as_u64().unwrap() < 130 << 20,
        "{made}"
    );
    let check = json(&pool.ok(&["snapshot", "check", "--read-data", "--json"]));
    assert_eq!(check["errors"].as_array().unwrap().len(), 0, "{check}");
    pool.start();
    let target = pool.dir.join("restored");
    std::fs::create_dir(&target).unwrap();
    let shard = src.join("shard1.bin");
    pool.ok(&[
        "snapshot",
        "restore",
        shard.to_str().unwrap(),
        "--target",
        target.to_str().unwrap(),
    ]);
    assert!(std::fs::read(target.join("shard1.bin")).unwrap() == bytes(1, 40 << 20));
    assert!(
        !pool
            .dir
            .join("backup/snapshots/packs/tmp")
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    );
}

#[test]
fn scheduled_backups_run_on_their_cron_and_keep_only_what_retention_says() {
    let mut pool = Pool::new("1:t4");
    let h = home(&pool);
    std::fs::create_dir_all(h.join("u")).unwrap();
    std::fs::write(h.join("u/a.txt"), "a").unwrap();
    pool.edit_config(|t| {
        let t = t
            .replace("keep_daily = 7", "keep_last = 2\nkeep_daily = 0")
            .replace("keep_weekly = 4", "keep_weekly = 0")
            .replace("keep_monthly = 6", "keep_monthly = 0");
        // Every 2 seconds, for the test; the datasets source stays nightly.
        t.replace("schedule = \"30 3 * * *\"", "schedule = \"*/2 * * * * *\"")
    });
    pool.start();
    let t0 = Instant::now();
    let mut seen = std::collections::BTreeSet::new();
    while t0.elapsed() < Duration::from_secs(30) && seen.len() < 4 {
        let list = json(&pool.ok(&["snapshot", "list", "--source", "home", "--json"]));
        let ids: Vec<String> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect();
        // Retention runs right after each backup: a listing between the two sees the new
        // snapshot beside the 2 kept, never more.
        assert!(ids.len() <= 3, "retention keeps the newest 2: {list}");
        seen.extend(ids);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        seen.len() >= 4,
        "scheduled backups ran {} times in 30 s:\n{}",
        seen.len(),
        pool.serve_log()
    );
    has(
        &pool.serve_log(),
        &["snapshot", "of home", "forgot 1 by retention"],
    );
    // Only home is on the fast schedule.
    let all = json(&pool.ok(&["snapshot", "list", "--json"]));
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|s| s["source"] == "home"),
        "{all}"
    );
}

#[test]
fn bad_snapshot_input_says_what_to_do_and_changes_nothing() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let err = fails_stderr(&pool, &["snapshot", "ls", "latest"]);
    has(&err, &["no snapshots yet", "labpool snapshot create"]);
    let err = fails_stderr(&pool, &["snapshot", "create", "--source", "nope"]);
    has(&err, &["no snapshot source \"nope\"", "datasets, home"]);
    let err = fails_stderr(&pool, &["snapshot", "create", "--path", "/does/not/exist"]);
    has(&err, &["--path /does/not/exist", "existing directory"]);
    let h = home(&pool);
    std::fs::write(h.join("x.txt"), "x").unwrap();
    pool.ok(&["snapshot", "create", "--source", "home"]);
    let x = h.join("x.txt");
    let x = x.to_str().unwrap();
    let err = fails_stderr(&pool, &["snapshot", "restore", x, "--at", "last tuesday"]);
    has(&err, &["\"last tuesday\" is not a snapshot id, a date"]);
    let err = fails_stderr(&pool, &["snapshot", "restore", "/etc/passwd"]);
    has(&err, &["no snapshot covers that directory"]);
    let err = fails_stderr(&pool, &["snapshot", "ls", "ffffffff"]);
    has(&err, &["no snapshot matches \"ffffffff\"", "snapshot list"]);
    let err = fails_stderr(
        &pool,
        &["snapshot", "restore", x, "--target", "/no/such/dir"],
    );
    has(&err, &["--target /no/such/dir", "existing directory"]);
    let err = fails_stderr(&pool, &["snapshot", "forget", "--keep-daily", "0"]);
    has(&err, &["keeps nothing", "--keep-daily"]);
    let err = fails_stderr(&pool, &["snapshot", "diff", "latest", "nope1234"]);
    has(&err, &["no snapshot matches"]);
    let list = json(&pool.ok(&["snapshot", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(std::fs::read_to_string(h.join("x.txt")).unwrap(), "x");
    let _ = pool.ok(&["snapshot", "forget", "--keep-last", "5"]);
    assert_eq!(
        json(&pool.ok(&["snapshot", "list", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_run_missed_while_the_controller_was_down_is_caught_up_once_at_start() {
    let mut pool = Pool::new("1:t4");
    let h = home(&pool);
    std::fs::write(h.join("a.txt"), "a").unwrap();
    // Yearly, on January 1st at midnight: never due during the test unless missed.
    pool.edit_config(|t| t.replace("schedule = \"30 3 * * *\"", "schedule = \"0 0 1 1 *\""));
    let list = |pool: &Pool| json(&pool.ok(&["snapshot", "list", "--json"]));
    // First start: nothing was missed, nothing runs.
    pool.start();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        list(&pool).as_array().unwrap().len(),
        0,
        "{}",
        pool.serve_log()
    );
    pool.stop();
    // The controller was "down" since before the last New Year: one catch-up run at start.
    std::fs::write(
        pool.dir.join("state/snapshot-timer.json"),
        "\"2020-06-01T00:00:00Z\"",
    )
    .unwrap();
    pool.start();
    // Both sources missed runs (datasets nightly, home on New Year), and so did the nightly
    // state backup, which goes into the repository too: each runs once. Under load the three
    // runs end seconds apart, so wait for all three, then a little longer for any fourth.
    let t0 = Instant::now();
    while list(&pool).as_array().unwrap().len() < 3 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let l = list(&pool);
    let mut sources: Vec<&str> = l
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    sources.sort();
    assert_eq!(
        sources,
        vec!["datasets", "home", "labpool-state"],
        "caught up once each, not once per missed run:\n{l}\n{}",
        pool.serve_log()
    );
}
