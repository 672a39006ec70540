//! `#SBATCH` and `#LABPOOL` lines of a job script, and every option they carry.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::script(data));
