//! Sizes, rates and durations as config files and options write them; what the printer
//! writes reads back.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::units(data));
