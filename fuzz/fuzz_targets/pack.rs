//! A pack file's trailer, and each blob it points at, as `snapshot check` and restores read them.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::pack(data));
