//! Quota scan and scratch purge against `du` and `find` (being written).

fn main() {}
