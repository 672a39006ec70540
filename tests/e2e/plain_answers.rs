//! Small answers that were not true, each as a member or admin met it: a word where a job id
//! goes, a user nobody has, moments written four ways, a `--begin` job with no start time, a
//! running job with no end time, and a purge dry run with no counts.

use crate::pool::{Pool, has, s};
use std::time::Duration;

/// `YYYY-MM-DD HH:MM:SS`, labpool's one way of writing a moment, found right after `after`.
fn moment_after<'a>(text: &'a str, after: &str) -> &'a str {
    let start = text
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in:\n{text}"))
        + after.len();
    let rest = text[start..].trim_start();
    let m = rest.get(..19).unwrap_or(rest);
    let shape = m.len() == 19
        && m.chars().enumerate().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == ' ',
            13 | 16 => c == ':',
            _ => c.is_ascii_digit(),
        });
    assert!(
        shape,
        "{after:?} is not followed by YYYY-MM-DD HH:MM:SS in:\n{text}"
    );
    m
}

#[test]
fn commands_answer_plainly_and_write_moments_one_way() {
    let mut pool = Pool::new("1:rtx4090");
    pool.start();
    // A word where a job id goes, and a user nobody has: errors that say what to give.
    let out = pool.cli(&["show", "abc"]);
    assert!(!out.status.success());
    has(
        &String::from_utf8_lossy(&out.stderr),
        &["\"abc\" is not a job id", "labpool queue"],
    );
    for cmd in ["queue", "history"] {
        let out = pool.cli(&[cmd, "--user", "nosuch-lp-user"]);
        assert!(!out.status.success(), "{cmd}: {out:?}");
        has(
            &String::from_utf8_lossy(&out.stderr),
            &["no user \"nosuch-lp-user\" on this host"],
        );
    }

    let running = pool.submit(&["-t", "10", "--gpus", "1", "--wrap", "sleep 120"]);
    let job = pool.wait_for(running, Duration::from_secs(20), |j| {
        j["state"] == "RUNNING"
    });
    let later = pool.submit(&["--begin", "now+1hour", "--wrap", "true"]);
    // show, why, and the moment in each is written the same way.
    let show = pool.ok(&["show", &running.to_string()]);
    moment_after(&show, "submitted");
    let why = pool.ok(&["why", &running.to_string()]);
    let since = moment_after(&why, "since");
    let started = crate::pool::local_moment(s(&job, "start_time"));
    assert_eq!(since, started, "{why}");

    // Slurm's tools: a --begin job starts no earlier than its begin time; a running job ends
    // when its time limit does.
    let start = pool.slurm("squeue", &["--start", "-h", "-o", "%i %S"]);
    let line = start
        .lines()
        .find(|l| l.starts_with(&format!("{later} ")))
        .unwrap_or_else(|| panic!("{start}"));
    assert!(!line.ends_with("N/A"), "{start}");
    let shown = pool.slurm("scontrol", &["show", "job", &running.to_string()]);
    let end = shown
        .split_whitespace()
        .find_map(|w| w.strip_prefix("EndTime="))
        .unwrap();
    let begin = shown
        .split_whitespace()
        .find_map(|w| w.strip_prefix("StartTime="))
        .unwrap();
    let parse = |t: &str| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S").unwrap();
    assert_eq!(
        (parse(end) - parse(begin)).num_seconds(),
        600,
        "EndTime is StartTime plus the 10 min limit: {shown}"
    );
    pool.ok(&["cancel", &running.to_string(), &later.to_string()]);

    // A dry run says how much it would delete, even when that is nothing.
    let plan = pool.ok(&["purge", "scratch", "--dry-run"]);
    has(
        &plan,
        &[
            "dry run: 0 files (0B) of 0 members would be deleted",
            "nothing was deleted",
        ],
    );
}
