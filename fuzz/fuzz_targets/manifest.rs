//! A dataset manifest as a node reads it from the shared source or a peer.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::manifest(data));
