//! Quotas, the scratch purge and the datasets audit through the real binary and controller:
//! limits set and shown, a submit refused over the hard limit with the exact message and
//! warned at 90%, bad input refused with nothing changed, members kept to their own quota;
//! the purge deletes only what is old, keeps markers, jobs' directories and symlink targets,
//! logs every file, and sends notices to the owner's home and the alert webhook.

use crate::pool::{Pool, ensure_user, has, have_root, stdout_of};
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(pool: &Pool) -> PathBuf {
    pool.dir.join("shared/scratch")
}

fn user_dir(root: &Path, name: &str, uid: u32, gid: u32) -> PathBuf {
    let d = root.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(uid), Some(gid)).unwrap();
    d
}

fn write_owned(path: &Path, len: usize, uid: u32, gid: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, vec![0x5au8; len]).unwrap();
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
}

/// `POST /v1/jobs` on `pool`'s socket as `uid` (the controller knows callers by their socket
/// credentials), a submit with `key`: the status and the body.
fn submit_as(pool: &Pool, uid: u32, gid: u32, key: &str) -> (u16, Value) {
    const POST: &str = r#"
import socket, sys
body = sys.argv[2].encode()
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: labpool\r\nContent-Type: application/json\r\n"
          b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
out = b""
while chunk := s.recv(65536):
    out += chunk
head, _, body = out.partition(b"\r\n\r\n")
print(head.split(b" ")[1].decode())
sys.stdout.buffer.write(body)
"#;
    let body = serde_json::json!({
        "name": "retry", "script": "#!/bin/sh\ntrue\n", "workdir": pool.work,
        "gpus": 0, "cpus": 1, "mem_mib": 0, "umask": 18, "idempotency_key": key,
    });
    let out = std::process::Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--init-groups".into(),
        ])
        .args(["/usr/bin/python3", "-c", POST])
        .arg(pool.dir.join("labpool.sock"))
        .arg(body.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout_of(&out);
    let (status, body) = text.split_once('\n').unwrap_or((&text, ""));
    (status.parse().unwrap_or(0), json(body))
}

#[test]
fn limits_are_shown_and_enforced_at_submit() {
    if !have_root("limits_are_shown_and_enforced_at_submit") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let mut pool = Pool::new("1:t4").for_users();
    let a = user_dir(&scratch(&pool), "lp-alice", alice, alice_gid);
    write_owned(&a.join("runs/ckpt.bin"), 5_000_000, alice, alice_gid);
    write_owned(&a.join("notes.txt"), 100, alice, alice_gid);
    pool.start();
    let as_alice = |args: &[&str]| pool.cli_as(alice, alice_gid, args);

    // Bad input: each is refused with a clear error and nothing changes.
    let before = pool.ok(&["quota", "--user", "lp-alice", "--json"]);
    for (args, says) in [
        (
            vec!["quota", "set", "lp-nobody", "--home", "1G"],
            "no user \"lp-nobody\"",
        ),
        (
            vec!["quota", "set", "lp-alice", "--home", "-5G"],
            "bad size \"-5G\"",
        ),
        (
            vec!["quota", "set", "lp-alice", "--scratch", "5X"],
            "bad size \"5X\"",
        ),
        (
            vec![
                "quota",
                "set",
                "lp-alice",
                "--home",
                "1G",
                "--scratch",
                "lots",
            ],
            "bad size \"lots\"",
        ),
        (
            vec![
                "quota", "set", "lp-alice", "--fs", "home", "--soft", "2G", "--hard", "1G",
            ],
            "soft limit on bytes (2G) is above the hard limit (1G)",
        ),
        (
            vec!["quota", "set", "lp-alice", "--fs", "tmp", "--hard", "1G"],
            "no file system \"tmp\"",
        ),
        (
            vec![
                "quota",
                "set",
                "lp-alice",
                "--fs",
                "home",
                "--files-hard",
                "-3",
            ],
            "bad file count",
        ),
        (vec!["quota", "set", "lp-alice"], "no limit given"),
    ] {
        let out = pool.cli(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        has(&stderr(&out), &[says]);
    }
    let after = pool.ok(&["quota", "--user", "lp-alice", "--json"]);
    assert_eq!(
        json(&before)["filesystems"],
        json(&after)["filesystems"],
        "bad input changed something"
    );

    // Members see their own quota only, and set nothing.
    let out = as_alice(&["quota", "set", "lp-alice", "--scratch", "1T"]);
    has(&stderr(&out), &["only admins may set quotas"]);
    let out = as_alice(&["quota", "--user", "lp-bob"]);
    has(&stderr(&out), &["only admins may see another user's quota"]);
    let out = as_alice(&["quota", "report"]);
    has(&stderr(&out), &["only admins may see every user's quota"]);

    // An admin sets a hard limit below alice's usage; a scan counts it.
    pool.ok(&[
        "quota",
        "set",
        "lp-alice",
        "--scratch",
        "4M",
        "--home",
        "1G",
    ]);
    pool.ok(&[
        "quota", "default", "--fs", "scratch", "--soft", "100G", "--hard", "200G",
    ]);
    // Written back first: ext4 adds an extent block to a fragmented file at writeback, after
    // which its block count is final.
    nix::unistd::sync();
    let scanned = pool.ok(&["quota", "scan", "--json"]);
    assert_eq!(
        json(&scanned)["done"].as_array().unwrap().len(),
        2,
        "{scanned}"
    );
    let q = json(&stdout_of(&as_alice(&["quota", "--json"])));
    let s = &q["filesystems"][1];
    assert_eq!(s["fs"], "scratch");
    assert_eq!(s["limit"]["hard_bytes"], 4u64 << 20);
    assert_eq!(s["limit_source"], "user");
    let used = s["usage"]["bytes"].as_u64().unwrap();
    // `runs` itself was made by root: it is root's, not alice's.
    let expect: u64 = ["runs/ckpt.bin", "notes.txt", ""]
        .iter()
        .map(|p| std::fs::symlink_metadata(a.join(p)).unwrap().blocks() * 512)
        .sum();
    assert_eq!(
        used, expect,
        "alice's scratch usage is her files' and directories' blocks"
    );
    assert_eq!(s["usage"]["files"], 3);
    assert_eq!(s["top"][0]["path"], a.to_str().unwrap());
    assert!(q["refused"].as_bool().unwrap());
    // Bob falls under the admin's default.
    let bq = json(&pool.ok(&["quota", "--user", "lp-bob", "--json"]));
    assert_eq!(bq["filesystems"][1]["limit_source"], "default");
    assert_eq!(bq["filesystems"][1]["limit"]["soft_bytes"], 100u64 << 30);

    // The exact refusal, with usage, limit, the biggest directories and what to do.
    let out = as_alice(&["submit", "--wrap", "true"]);
    assert!(!out.status.success());
    let text = stderr(&out);
    let used_h = {
        let s = json(&pool.ok(&["quota", "--user", "lp-alice", "--json"]));
        s["filesystems"][1]["messages"][0]
            .as_str()
            .unwrap()
            .to_string()
    };
    has(
        &text,
        &[
            "lp-alice is over quota; new jobs are refused:",
            &used_h,
            "at or over the hard limit of 4M",
            &format!("biggest directories on scratch: {} ", a.display()),
            "hint: delete or move files",
            "Running jobs are not affected",
        ],
    );
    let text = stdout_of(&as_alice(&["quota"]));
    has(
        &text,
        &[
            "scratch",
            " 4M ",
            "New jobs are refused",
            "biggest directories",
        ],
    );
    let report = pool.ok(&["quota", "report"]);
    has(&report, &["lp-alice", "OVER: jobs refused"]);
    let first_line = report.lines().nth(1).unwrap();
    assert!(
        first_line.starts_with("lp-alice"),
        "fullest first: {report}"
    );

    // At 90% or more of the limit a submit is warned, and goes in.
    let limit = ((used as f64 / 0.95) as u64).to_string();
    let set_hard = |v: &str| pool.ok(&["quota", "set", "lp-alice", "--fs", "scratch", "--hard", v]);
    set_hard(&limit);
    pool.ok(&["quota", "scan", "--fs", "scratch"]);
    let out = as_alice(&["submit", "--wrap", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    has(&stderr(&out), &["warning: quota: scratch:", "(95%)"]);
    // A limit counts from the next submit, with no scan between: the controller keeps the
    // quota tables in memory, and a limit set must not leave the old ones there.
    let (status, first) = submit_as(&pool, alice, alice_gid, "retried");
    assert_eq!(status, 200, "{first}");
    set_hard(&(used / 2).to_string());
    let out = as_alice(&["submit", "--wrap", "true"]);
    assert!(!out.status.success(), "a limit below usage refuses at once");
    has(
        &stderr(&out),
        &["lp-alice is over quota; new jobs are refused:"],
    );
    // A retry of a submit taken before gets its first answer, not the refusal; a new one
    // through the same door is refused.
    let (status, again) = submit_as(&pool, alice, alice_gid, "retried");
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["job_id"], first["job_id"], "{first} {again}");
    let (status, new) = submit_as(&pool, alice, alice_gid, "new");
    assert_eq!(status, 403, "{new}");
    set_hard(&limit);
    // After cleaning up and a scan, no warning at all.
    std::fs::remove_file(a.join("runs/ckpt.bin")).unwrap();
    as_alice(&["quota", "scan"]);
    let out = as_alice(&["submit", "--wrap", "true"]);
    assert!(out.status.success());
    assert!(!stderr(&out).contains("quota"), "{}", stderr(&out));
    let _ = (bob, bob_gid);
}

#[test]
fn the_purge_deletes_only_old_files_and_never_follows_links() {
    if !have_root("the_purge_deletes_only_old_files_and_never_follows_links") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let mut pool = Pool::new("1:t4").for_users();
    // Ages in seconds: a file untouched for 3 s is "old" here, as one of 30 days is in a lab.
    pool.edit_config(|t| {
        t.replace("max_age = \"30d\"", "max_age = \"3s\"")
            .replace("warn_days = 7", "warn_days = 0")
    });
    let root = scratch(&pool);
    let a = user_dir(&root, "lp-alice", alice, alice_gid);
    let b = user_dir(&root, "lp-bob", bob, bob_gid);
    let outside = pool.dir.join("precious");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("thesis.tex"), "years of work").unwrap();
    write_owned(&a.join("old/a.bin"), 10_000, alice, alice_gid);
    write_owned(&a.join("old/b.bin"), 20_000, alice, alice_gid);
    write_owned(&a.join("keep/.labpool-keep"), 0, alice, alice_gid);
    write_owned(&a.join("keep/results.csv"), 500, alice, alice_gid);
    std::os::unix::fs::symlink(&outside, a.join("evil")).unwrap();
    std::os::unix::fs::lchown(a.join("evil"), Some(alice), Some(alice_gid)).unwrap();
    write_owned(&b.join("job/input.dat"), 3000, bob, bob_gid);
    // The job writes its output there.
    std::os::unix::fs::chown(b.join("job"), Some(bob), Some(bob_gid)).unwrap();
    pool.start();
    // Bob's job runs in its directory for the whole test.
    let out = pool.cli_as(
        bob,
        bob_gid,
        &[
            "submit",
            "--parsable",
            "--chdir",
            b.join("job").to_str().unwrap(),
            "--wrap",
            "sleep 60",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let job: u64 = stdout_of(&out).trim().parse().unwrap();
    pool.wait_for(job, Duration::from_secs(20), |j| j["state"] == "RUNNING");
    std::thread::sleep(Duration::from_secs(4));
    write_owned(&a.join("old/new.bin"), 1000, alice, alice_gid);

    // The plan: per user, the oldest files; kept directories said.
    let plan = json(&pool.ok(&["purge", "scratch", "--dry-run", "--json"]));
    let planned: Vec<&str> = plan["oldest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    let expect_gone = [a.join("old/a.bin"), a.join("old/b.bin"), a.join("evil")];
    let mut want: Vec<String> = expect_gone
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    want.sort();
    let mut got: Vec<String> = planned.iter().map(|s| s.to_string()).collect();
    got.sort();
    assert_eq!(got, want, "{plan}");
    assert_eq!(plan["per_user"][0]["user"], "lp-alice");
    assert_eq!(plan["total"]["files"], 3);
    assert!(plan["kept"].to_string().contains("keep"), "{plan}");
    assert!(plan["jobs_skipped"].to_string().contains("job"), "{plan}");
    // The dry run deleted nothing; without a terminal and --yes nothing is deleted either.
    assert!(a.join("old/a.bin").exists());
    let out = pool.cli(&["purge", "scratch"]);
    assert!(!out.status.success());
    has(
        &stderr(&out),
        &["not deleting without confirmation", "--yes"],
    );
    assert!(a.join("old/a.bin").exists());
    // A member may not purge.
    let out = pool.cli_as(alice, alice_gid, &["purge", "scratch", "--yes"]);
    has(&stderr(&out), &["only admins may purge scratch"]);

    let done = json(&pool.ok(&["purge", "scratch", "--yes", "--json"]));
    assert_eq!(done["removed"]["files"], 3, "{done}");
    for p in &expect_gone {
        assert!(
            std::fs::symlink_metadata(p).is_err(),
            "{} should be gone",
            p.display()
        );
    }
    for p in [
        a.join("old/new.bin"),
        a.join("keep/results.csv"),
        a.join("keep/.labpool-keep"),
        b.join("job/input.dat"),
        outside.join("thesis.tex"),
    ] {
        assert!(p.exists(), "{} should stay", p.display());
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("thesis.tex")).unwrap(),
        "years of work"
    );
    // The audit log lists exactly what went.
    let log = std::fs::read_to_string(pool.dir.join("state/purge-audit.log")).unwrap();
    let mut logged: Vec<String> = log
        .lines()
        .map(|l| json(l)["path"].as_str().unwrap().to_string())
        .collect();
    logged.sort();
    assert_eq!(logged, want);
    assert!(log.contains(&format!("\"uid\":{alice}")));
    pool.ok(&["cancel", &job.to_string()]);
}

#[test]
fn owners_get_a_notice_in_their_home_and_on_the_webhook() {
    if !have_root("owners_get_a_notice_in_their_home_and_on_the_webhook") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:t4").for_users();
    let (url, posted) = crate::pool::webhook();
    // Files pass the limit a day and 2 s after they were touched; notices go a day before.
    pool.edit_config(|t| {
        t.replace("max_age = \"30d\"", "max_age = \"86402s\"")
            .replace("warn_days = 7", "warn_days = 1")
            .replace("# [alerts]", "[alerts]")
            .replace(
                "# webhook = \"http://127.0.0.1:9000/labpool\"",
                &format!("webhook = \"{url}\""),
            )
    });
    let a = user_dir(&scratch(&pool), "lp-alice", alice, alice_gid);
    let home = user_dir(&pool.dir.join("shared/home"), "lp-alice", alice, alice_gid);
    write_owned(&a.join("data/soon.bin"), 4096, alice, alice_gid);
    pool.start();
    std::thread::sleep(Duration::from_secs(3));
    let done = json(&pool.ok(&["purge", "scratch", "--yes", "--json"]));
    assert_eq!(done["removed"]["files"], 0, "{done}");
    assert!(a.join("data/soon.bin").exists());
    let notice = home.join(".labpool/purge-notice.txt");
    let text = std::fs::read_to_string(&notice).unwrap();
    has(
        &text,
        &[a.join("data/soon.bin").to_str().unwrap(), ".labpool-keep"],
    );
    assert_eq!(std::fs::metadata(&notice).unwrap().uid(), alice);
    let body = json(&posted.recv_timeout(Duration::from_secs(10)).unwrap());
    assert_eq!(body["kind"], "purge_notice");
    assert_eq!(body["user"], "lp-alice");
    assert_eq!(body["files"], 1);
}

#[test]
fn the_datasets_audit_finds_and_fixes_what_members_could_write() {
    if !have_root("the_datasets_audit_finds_and_fixes_what_members_could_write") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:t4").for_users();
    let d = pool.dir.join("shared/datasets/cifar");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("train.bin"), "x").unwrap();
    std::fs::write(d.join("open.bin"), "x").unwrap();
    write_owned(&d.join("hers.bin"), 10, alice, alice_gid);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.join("open.bin"), std::fs::Permissions::from_mode(0o666)).unwrap();
    pool.start();
    let r = json(&pool.ok(&["dataset", "audit", "--json"]));
    let offenders: Vec<(String, Value)> = r["offenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["path"].as_str().unwrap().to_string(), o["why"].clone()))
        .collect();
    assert_eq!(
        offenders,
        vec![
            (
                d.join("hers.bin").display().to_string(),
                serde_json::json!(["member-owned"])
            ),
            (
                d.join("open.bin").display().to_string(),
                serde_json::json!(["world-writable"])
            ),
        ]
    );
    let out = pool.cli_as(alice, alice_gid, &["dataset", "audit", "--fix"]);
    has(&stderr(&out), &["only admins may audit datasets"]);
    pool.ok(&["dataset", "audit", "--fix"]);
    assert_eq!(std::fs::metadata(d.join("hers.bin")).unwrap().uid(), 0);
    assert_eq!(
        std::fs::metadata(d.join("open.bin")).unwrap().mode() & 0o777,
        0o664
    );
    let text = pool.ok(&["dataset", "audit"]);
    has(&text, &["members can write nothing"]);
}
