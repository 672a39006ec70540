//! The progress bar for long copies (staging, snapshots, restores): one style, with sizes and
//! rates printed as labpool prints them everywhere else (`1.5G/12G 84M/s`).

use indicatif::{ProgressState, ProgressStyle};
use labpool_units::{format_rate, format_size};
use std::fmt::Write;

/// A bar for `total` bytes, labelled with the bar's message: `msg [=====>   ] 1.5G/12G 84M/s eta 2m`.
pub fn bytes_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg} [{bar:30}] {done}/{total} {rate} eta {eta}")
        .expect("a fixed template")
        .with_key("done", |s: &ProgressState, w: &mut dyn Write| {
            let _ = w.write_str(&format_size(s.pos()));
        })
        .with_key("total", |s: &ProgressState, w: &mut dyn Write| {
            let _ = w.write_str(&format_size(s.len().unwrap_or(0)));
        })
        .with_key("rate", |s: &ProgressState, w: &mut dyn Write| {
            let _ = w.write_str(&format_rate(s.per_sec()));
        })
        .progress_chars("=> ")
}
