//! Every API body and query string a member's client can send to the controller, with the
//! submit checks that need no state.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::api(data));
