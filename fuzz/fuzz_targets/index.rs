//! The snapshot index (an SQLite file) as a repository opens and reads it: a damaged file is
//! an error, never a panic.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::index(data));
