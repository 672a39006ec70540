//! `labpool logs`: the daemon's log on this machine (`[controller] log_file`), oldest line
//! first across its rotated files, by job, node or time. For admins: the file is readable by
//! whoever the daemon's umask lets read it, usually root. Under systemd with its output in the
//! journal there is no file: `journalctl -u labpool` has the lines.

use crate::args::LogsArgs;
use crate::settings::Config;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Longest line read; a longer one is cut (a log line is written by labpool, but may quote
/// what a member typed).
const MAX_LINE: usize = 64 << 10;

/// One line of the log.
#[derive(Debug, serde::Serialize)]
struct Line {
    /// When, as the line says (UTC, RFC 3339); absent for lines without a time.
    time: Option<String>,
    /// The whole line.
    text: String,
}

/// The log's files, oldest first: `labpool.log.N` … `labpool.log.1`, then `labpool.log`.
fn files(path: &Path, keep: usize) -> Vec<PathBuf> {
    let rotated = (1..=keep).rev().map(|n| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    });
    rotated
        .chain(std::iter::once(path.to_path_buf()))
        .filter(|p| p.exists())
        .collect()
}

/// `line` names `key=value` as a field (tracing writes `job=7`, or `node="gpu1"` for text).
fn has_field(line: &str, key: &str, value: &str) -> bool {
    line.split_whitespace().any(|token| {
        token
            .strip_prefix(key)
            .and_then(|t| t.strip_prefix('='))
            .is_some_and(|v| v == value || v.trim_matches('"') == value)
    })
}

/// The time a line starts with, as written and in ms, when it starts with one.
fn time_of(line: &str) -> Option<(&str, i64)> {
    let stamp = line.split_whitespace().next()?;
    Some((stamp, crate::clock::parse_ms(stamp)?))
}

/// Runs `labpool logs`.
pub fn run(args: &LogsArgs, config: &Config) -> anyhow::Result<()> {
    let Some(path) = config.controller.log_file.as_deref() else {
        anyhow::bail!(
            "{} sets no log_file under [controller]: the daemon logs to standard error only (started by systemd: journalctl -u labpool)",
            config.path.display()
        );
    };
    let since = args
        .since
        .as_deref()
        .map(|s| crate::when::parse_when(s, chrono::Local::now()))
        .transpose()?;
    let found = files(path, config.controller.log_keep);
    if found.is_empty() {
        anyhow::bail!(
            "no log at {}: a daemon started by systemd with its output in the journal logs there alone (journalctl -u labpool)",
            path.display()
        );
    }
    let job = args.job.map(|j| j.to_string());
    let keep = args.lines.unwrap_or(usize::MAX);
    let mut shown: VecDeque<Line> = VecDeque::new();
    for file in &found {
        let f = std::fs::File::open(file).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {}: {e}; the log is the admins' to read (run labpool logs with sudo)",
                file.display()
            )
        })?;
        for raw in BufReader::new(f).split(b'\n') {
            let mut raw = raw?;
            raw.truncate(MAX_LINE);
            let text = String::from_utf8_lossy(&raw).into_owned();
            let at = time_of(&text).map(|(stamp, ms)| (stamp.to_string(), ms));
            if since.is_some_and(|s| at.as_ref().is_none_or(|(_, t)| *t < s))
                || job.as_deref().is_some_and(|j| !has_field(&text, "job", j))
                || args
                    .node
                    .as_deref()
                    .is_some_and(|n| !has_field(&text, "node", n))
            {
                continue;
            }
            if shown.len() == keep {
                shown.pop_front();
            }
            if keep > 0 {
                shown.push_back(Line {
                    time: at.map(|(stamp, _)| stamp),
                    text,
                });
            }
        }
    }
    if args.json {
        crate::out!("{}", serde_json::to_string_pretty(&shown)?);
    } else {
        for l in &shown {
            crate::out!("{}", l.text);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_matched_whole() {
        let line = "2026-12-06T17:20:35.999190Z  INFO job started job=7 attempt=1 node=\"gpu1\"";
        assert!(has_field(line, "job", "7"));
        assert!(!has_field(line, "job", "70"));
        assert!(!has_field(line, "job", ""));
        assert!(has_field(line, "node", "gpu1"));
        assert!(time_of(line).is_some());
        assert_eq!(time_of(" INFO no time here"), None);
    }

    #[test]
    fn rotated_files_come_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("labpool.log");
        for name in ["labpool.log", "labpool.log.1", "labpool.log.2"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let names: Vec<String> = files(&log, 4)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["labpool.log.2", "labpool.log.1", "labpool.log"]);
    }
}
