//! How listings print: aligned plain tables for people, JSON for scripts.

use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;

pub use crate::api::cells::{exit_text, gpu_list};

/// An aligned table without borders, like `squeue`'s.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers);
    for row in rows {
        t.add_row(row);
    }
    // comfy-table pads each cell with a space on both sides; trim the outer ones.
    t.lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A spinner with `message`, for work whose length is not known (a scan, a build).
pub fn spinner(message: String) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner().with_message(message);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Writes a line to standard output. When the reader has gone (`labpool queue | head -1`), the
/// command ends quietly with status 0 instead of panicking as `println!` does.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{args}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write the output: {e}");
        std::process::exit(1);
    }
}

/// `println!` for command output: see [`write_out`].
#[macro_export]
macro_rules! out {
    () => {
        $crate::render::write_out(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::render::write_out(format_args!($($arg)*))
    };
}

/// Prints `value` as JSON when `as_json`, else the text `human` makes of it.
pub fn print<T: Serialize>(as_json: bool, value: &T, human: impl FnOnce(&T) -> String) {
    if as_json {
        crate::out!("{}", json(value));
    } else {
        crate::out!("{}", human(value));
    }
}

/// Pretty JSON.
pub fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("API values serialise")
}

/// An optional value for tables.
pub fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// `text` safe to print on someone's terminal: control characters (escape sequences, bells,
/// carriage returns, newlines) written as `\u{1b}` and so on. A member names jobs, paths and
/// comments that other members' `show` prints.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
