//! The protocol between nodes: what an agent sends the controller, what the controller sends
//! an agent, peers' stage queries, and the signature headers, checked from the headers alone.
#![no_main]

#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::agent(data));
