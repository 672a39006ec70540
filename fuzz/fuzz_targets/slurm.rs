//! What Slurm users type outside scripts: srun's command line, --begin times, squeue and sinfo
//! formats, host lists.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::slurm(data));
