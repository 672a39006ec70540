//! Snapshot benchmark: being written.
fn main() {}
