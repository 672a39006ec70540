//! How a job's values read in a table cell or on a dashboard page: the CLI and the web say it
//! the same way.

/// How a job ended, for tables: the exit code, `sig9`, or `-`.
pub fn exit_text(exit_code: Option<i32>, signal: Option<i32>) -> String {
    match (exit_code, signal) {
        (Some(c), _) => c.to_string(),
        (None, Some(s)) => format!("sig{s}"),
        _ => "-".to_string(),
    }
}

/// A GPU list for tables: `0,1` or `-`.
pub fn gpu_list(gpus: &[u32]) -> String {
    if gpus.is_empty() {
        "-".to_string()
    } else {
        gpus.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}
