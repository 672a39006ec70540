//! The controller's disk dies (its loop image is removed, state and all). With snapshots on,
//! `labpool state backup` also went into the snapshot repository, and the off-box copy in S3
//! (moto's server) carries it: a new machine fetches the copy, restores the state from it alone,
//! and finds every record: the history, the held job, accounts and members, the credit grant,
//! the reservation.

use crate::pool::{Pool, have_root, have_tool, stdout_of};
use crate::snapshot_copy::{Moto, s3_config};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

/// What the pool holds, as its listings show it.
fn records(pool: &Pool) -> Vec<String> {
    let history: Vec<Value> = serde_json::from_str(&pool.ok(&["history", "--json"])).unwrap();
    let queue: Vec<Value> = serde_json::from_str(&pool.ok(&["queue", "--json"])).unwrap();
    let mut out: Vec<String> = history
        .iter()
        .chain(&queue)
        .map(|j| {
            format!(
                "job {} {} {} {}",
                j["id"], j["name"], j["state"], j["account"]
            )
        })
        .collect();
    let accounts = pool.ok(&["account", "list", "--json"]);
    let accounts: Value = serde_json::from_str(&accounts).unwrap();
    out.push(format!("accounts {}", accounts["accounts"]));
    let credits: Value =
        serde_json::from_str(&pool.ok(&["credits", "--json", "-u", "root"])).unwrap();
    out.push(format!("granted {}", credits["granted"]));
    let reservations = pool.ok(&["reservation", "list", "--json"]);
    let reservations: Value = serde_json::from_str(&reservations).unwrap();
    for r in reservations.as_array().unwrap() {
        out.push(format!("reservation {} {}", r["name"], r["account"]));
    }
    out.sort();
    out
}

#[test]
fn a_pool_whose_state_disk_is_lost_comes_back_from_the_s3_copy_with_every_record() {
    let test = "a_pool_whose_state_disk_is_lost_comes_back_from_the_s3_copy_with_every_record";
    if !have_root(test) || !have_tool(test, "mkfs.ext4") {
        return;
    }
    let Some(moto) = Moto::start(test) else {
        return;
    };
    // The controller's state lives on its own disk: an ext4 loop image.
    let mut pool = Pool::new("1:t4");
    let (image, state) = (pool.dir.join("state.img"), pool.dir.join("state"));
    run(Command::new("truncate").args(["-s", "64M"]).arg(&image));
    run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image));
    std::fs::create_dir_all(&state).unwrap();
    run(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&state));
    s3_config(&pool, &moto);
    pool.edit_config(|t| {
        t.replacen(
            "[snapshots]\n",
            "[snapshots]\ncopy_to = \"s3://lab/lost\"\n",
            1,
        )
    });
    pool.start();

    pool.ok(&["account", "add", "vision"]);
    pool.ok(&["account", "add-user", "vision", "root"]);
    pool.ok(&["credits", "grant", "root", "25"]);
    pool.ok(&[
        "reservation",
        "create",
        "maint",
        "--start",
        "now+2days",
        "--duration",
        "1:00:00",
        "--gpus",
        "1",
        "--account",
        "vision",
    ]);
    let done = pool.submit(&[
        "--job-name",
        "before-the-loss",
        "--account",
        "vision",
        "--wrap",
        "true",
    ]);
    pool.wait_done(done, Duration::from_secs(20));
    pool.submit(&["--job-name", "held", "--hold", "--wrap", "true"]);
    let before = records(&pool);

    let said = pool.ok(&["state", "backup"]);
    assert!(said.contains("into the snapshot repository too"), "{said}");
    let copied = pool.ok(&["snapshot", "copy"]);
    assert!(copied.contains("sent"), "{copied}");

    // The disk is lost: the controller dies with it, and its image is gone.
    pool.kill9();
    run(Command::new("umount").arg("-l").arg(&state));
    std::fs::remove_file(&image).unwrap();

    // A new machine: its own fresh directory, the same bucket.
    let mut new = Pool::new("1:t4");
    s3_config(&new, &moto);
    let fetched = new.dir.join("fetched");
    new.ok(&[
        "snapshot",
        "fetch",
        "--from",
        "s3://lab/lost",
        "--to",
        fetched.to_str().unwrap(),
    ]);
    let out = new.cli(&["state", "restore", "--from-repo", fetched.to_str().unwrap()]);
    let said = stdout_of(&out);
    assert!(said.contains("restored 2 jobs"), "{said}");
    new.start();
    assert_eq!(records(&new), before);
    assert!(
        before.iter().any(|r| r.contains("\"held\" \"PENDING\"")),
        "{before:?}"
    );
}
