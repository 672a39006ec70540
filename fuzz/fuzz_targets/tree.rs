//! A snapshot tree as a restore reads it: names must come out safe to create.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::tree(data));
