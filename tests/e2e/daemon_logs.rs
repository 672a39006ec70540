//! Where `labpool serve` logs: the journal alone when systemd gave it one (no second copy in
//! `log_file`), else standard error and a `log_file` rotated past `log_max_size`.

use crate::pool::Pool;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

/// `serve` started with standard error going to `serve.out`, and `JOURNAL_STREAM` naming
/// that file (as systemd names the journal's stream) or another.
fn pool_with_stream(names_stderr: bool) -> Pool {
    let mut pool = Pool::new("1:t4");
    let out = pool.dir.join("serve.out");
    std::fs::write(&out, "").unwrap();
    let meta = std::fs::metadata(&out).unwrap();
    let stream = if names_stderr {
        format!("{}:{}", meta.dev(), meta.ino())
    } else {
        format!("{}:{}", meta.dev(), meta.ino() + 1)
    };
    pool.env.push(("JOURNAL_STREAM".into(), stream));
    pool.start();
    let id = pool.submit(&["--wrap", "true"]);
    pool.wait_done(id, Duration::from_secs(20));
    pool
}

#[test]
fn under_the_journal_the_log_file_gets_no_second_copy() {
    let pool = pool_with_stream(true);
    let log = pool.dir.join("labpool.log");
    let journal = pool.serve_log();
    assert!(journal.contains("job started"), "{journal}");
    // The journal stamps each line itself.
    let first = journal.lines().next().unwrap_or_default();
    assert!(!first.starts_with("20"), "a timestamp of ours: {first}");
    let file = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        file.is_empty(),
        "a second copy in {}: {file}",
        log.display()
    );

    // A variable inherited by a process whose standard error went elsewhere changes nothing.
    let elsewhere = pool_with_stream(false);
    let file = std::fs::read_to_string(elsewhere.dir.join("labpool.log")).unwrap();
    assert!(file.contains("job started"), "{file}");
    assert!(elsewhere.serve_log().contains("job started"));
}

/// A started pool whose log rotates past 64 KiB, keeping `keep` old files, and logs at the
/// debug level, which fills 64 KiB in a few jobs.
fn rotating_pool(keep: u32) -> Pool {
    let mut pool = Pool::new("1:t4");
    pool.edit_config(|t| {
        t.replacen(
            "[controller]\n",
            &format!("[controller]\nlog_max_size = \"64K\"\nlog_keep = {keep}\n"),
            1,
        )
    });
    pool.env.push(("LABPOOL_LOG".into(), "debug".into()));
    pool.start();
    pool
}

#[test]
fn the_log_file_is_rotated_past_its_size_and_only_log_keep_are_kept() {
    let pool = rotating_pool(2);
    let log = pool.dir.join("labpool.log");
    let rotated = |n: u32| pool.dir.join(format!("labpool.log.{n}"));
    let mut jobs = 0;
    while !rotated(2).exists() {
        assert!(jobs < 200, "no second rotation after {jobs} jobs");
        let id = pool.submit(&["--wrap", "true"]);
        pool.wait_done(id, Duration::from_secs(20));
        jobs += 1;
    }
    for _ in 0..5 {
        let id = pool.submit(&["--wrap", "true"]);
        pool.wait_done(id, Duration::from_secs(20));
    }
    assert!(!rotated(3).exists(), "log_keep = 2 keeps two");
    for path in [log.clone(), rotated(1), rotated(2)] {
        let size = std::fs::metadata(&path).unwrap().len();
        // Cut after the write that passed the limit: whole lines, a little over at most.
        assert!(size <= 64 * 1024 + 4096, "{}: {size} bytes", path.display());
    }
    let one = std::fs::read_to_string(rotated(1)).unwrap();
    assert!(one.ends_with('\n'), "a line cut in two");
}

#[test]
fn labpool_logs_reads_the_rotated_files_by_job_and_time() {
    let pool = rotating_pool(3);
    let first = pool.submit(&["--wrap", "true"]);
    pool.wait_done(first, Duration::from_secs(20));
    // Enough later jobs that the first one's lines are in a rotated file.
    let mut last = first;
    while !pool.dir.join("labpool.log.1").exists() {
        last = pool.submit(&["--wrap", "true"]);
        pool.wait_done(last, Duration::from_secs(20));
    }
    let of_first = pool.ok(&["logs", "--job", &first.to_string()]);
    assert!(of_first.contains("job started"), "{of_first}");
    let field = format!("job={first}");
    for line in of_first.lines() {
        assert!(
            line.split_whitespace().any(|t| t == field),
            "a line about another job: {line}"
        );
    }
    let one = pool.ok(&["logs", "--job", &last.to_string(), "-n", "1"]);
    assert_eq!(one.lines().count(), 1, "{one}");
    assert_eq!(pool.ok(&["logs", "--since", "2099-01-01"]).trim(), "");
    let json: serde_json::Value =
        serde_json::from_str(&pool.ok(&["logs", "--job", &first.to_string(), "--json"])).unwrap();
    assert!(
        json[0]["time"].as_str().unwrap().starts_with("20"),
        "{json}"
    );

    // Under the journal there is no file to read: it says where the lines are.
    let journal = pool_with_stream(true);
    let (_, err) = crate::pool::fails(&journal, &["logs"]);
    assert!(err.contains("journalctl -u labpool"), "{err}");
}
