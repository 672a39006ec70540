//! What a command showed, held in an insta snapshot under `tests/e2e/shown/`, with what
//! changes from run to run or machine to machine filtered: the pool's directory, times and dates,
//! the first minute of a running job's elapsed time, its port lease, and this machine's
//! isolation and file-system words.
//!
//! A changed output fails the test and leaves `NAME.snap.new` beside the snapshot. After a
//! change made on purpose, rerun with `INSTA_UPDATE=always` (or review with `cargo insta
//! review`) and read the diff of `tests/e2e/shown/` before committing it.

use std::path::Path;

/// Compares `shown` with the snapshot `name`; `dir` is the pool's directory, shown as `[DIR]`.
/// Nothing else is filtered: for what does not change from run to run.
pub fn assert_shown(name: &str, dir: &Path, shown: &str) {
    assert_filtered(name, &[dir_filter(dir)], shown);
}

/// `dir`, written `[DIR]`.
fn dir_filter(dir: &Path) -> (String, &'static str) {
    (regex::escape(&dir.display().to_string()), "[DIR]")
}

/// Like [`assert_shown`], for what a running pool lists: times and dates, a running job's
/// first minute, its port lease, and this machine's isolation and file-system words are
/// filtered too.
pub fn assert_listed(name: &str, dir: &Path, shown: &str) {
    let mut filters = vec![dir_filter(dir)];
    filters.extend(
        [
            // RFC 3339 in JSON, then the tables' local times, then dates and months alone.
            (
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?",
                "[TIME]",
            ),
            (r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?", "[TIME]"),
            (r"\d{4}-\d\d-\d\d", "[DATE]"),
            (r"\b\d{4}-\d\d\b", "[MONTH]"),
            // A running job's elapsed time, within its first minute.
            (r"\b0:[0-5]\d\b", "[0:SS]"),
            (r#""elapsed_s": \d+"#, r#""elapsed_s": "[S]""#),
            // Each pool leases its own ports.
            (r#""first": \d+"#, r#""first": "[PORT]""#),
            // How this machine confines jobs, and whether its file system has quotas.
            (r#""isolation": "[^"]*""#, r#""isolation": "[ISOLATION]""#),
            (r"(?m)^(\S+ isolation:|  isolation ) .*$", "$1 [ISOLATION]"),
            (r"(?m)^enforced .*$", "enforced [HOW]"),
            (r#""enforcement": "[^"]*""#, r#""enforcement": "[HOW]""#),
            (r#""host": "[^"]*""#, r#""host": "[HOST]""#),
            // The release the agents run changes with each one.
            (
                r#""agent_version": "[^"]*""#,
                r#""agent_version": "[VERSION]""#,
            ),
            // Times in ms, and what grows with them: a waiting job's age, GPU-hours and credits
            // so far, and a month's days so far.
            (r"\b1\d{12}\b", "[MS]"),
            (r#""age": [0-9.e-]+"#, r#""age": "[AGE]""#),
            (r#""([a-z_]*gpu_hours)": [0-9.e-]+"#, r#""$1": "[H]""#),
            (
                r#""(balance|accruing|charged)": [0-9.e-]+"#,
                r#""$1": "[CREDITS]""#,
            ),
            // A finished job's charge: its whole seconds on the machine that ran it.
            (
                r#""amount": [0-9.e-]+(,\s*"job": \d+,\s*"kind": "charge")"#,
                r#""amount": "[CREDITS]"$1"#,
            ),
            (
                r#"("kind": "charge",\s*)"amount": [0-9.e-]+"#,
                r#"$1"amount": "[CREDITS]""#,
            ),
            (r"(?m)^(  (running jobs|balance) +)[0-9.]+$", "$1[CREDITS]"),
            // A waiting job's priority grows with its age (whole seconds waited): its
            // fraction is filtered, its whole part is the factors' sum.
            (r#""priority": (\d+)\.\d+"#, r#""priority": "$1.[AGE]""#),
            (r#"(?s)"by_day": \[\n.*?\n    \]"#, r#""by_day": "[DAYS]""#),
            // Snapshot ids and dataset versions hash their times.
            (r#""current": "[0-9a-f]{16}""#, r#""current": "[VERSION]""#),
            (r"\b[0-9a-f]{12}\b", "[VERSION]"),
            (r#""id": "[0-9a-f]{16}""#, r#""id": "[SNAPSHOT]""#),
            (r"(?m)^[0-9a-f]{8}  ", "[SNAP]    "),
        ]
        .into_iter()
        .map(|(from, to)| (from.to_string(), to)),
    );
    assert_filtered(name, &filters, shown);
}

/// The snapshot comparison, with `filters` applied in order.
fn assert_filtered(name: &str, filters: &[(String, &str)], shown: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("shown");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_filters(
        filters
            .iter()
            .map(|(from, to)| (from.as_str(), *to))
            .collect::<Vec<_>>(),
    );
    settings.bind(|| insta::assert_snapshot!(name, shown));
}

/// A config written by `labpool init` with its guesses about this machine (host name, cores,
/// memory) replaced by fixed values, so that what a pool shows is the same on every machine.
pub fn same_on_every_machine(text: &str) -> String {
    let mut section = "";
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with('[') {
            section = line;
        }
        let line = match section {
            "[node]" if line.starts_with("name = ") => "name = \"node1\"",
            "[node]" if line.starts_with("cpus = ") => "cpus = 16",
            "[node]" if line.starts_with("memory = ") => "memory = \"64G\"",
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}
