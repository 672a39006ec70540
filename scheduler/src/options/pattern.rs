//! Output file patterns (`%j`, `%x`…), expanded as Slurm expands them.

/// The values an output file pattern may refer to.
#[derive(Debug, Clone)]
pub struct PatternValues<'a> {
    /// Job id, for `%j`.
    pub job_id: u64,
    /// Job name, for `%x`.
    pub job_name: &'a str,
    /// User name, for `%u`.
    pub user: &'a str,
    /// Node name, for `%N`.
    pub node: &'a str,
    /// The array's id and this task's index, for `%A` and `%a`.
    pub array: Option<(u64, u32)>,
}

/// Expands `%j`, `%x`, `%u`, `%N`, `%A`, `%a` and `%%` in an output file pattern, as Slurm
/// does (outside an array, `%A` is the job id and `%a` Slurm's 4294967294).
///
/// ```
/// use labpool_scheduler::options::{expand_pattern, PatternValues};
/// let v = PatternValues { job_id: 42, job_name: "train", user: "alice", node: "gpu1", array: None };
/// assert_eq!(expand_pattern("logs/%x-%j.out", &v), "logs/train-42.out");
/// ```
pub fn expand_pattern(pattern: &str, v: &PatternValues<'_>) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => out.push_str(&v.job_id.to_string()),
            Some('x') => out.push_str(v.job_name),
            Some('u') => out.push_str(v.user),
            Some('N') => out.push_str(v.node),
            Some('A') => out.push_str(&v.array.map_or(v.job_id, |(a, _)| a).to_string()),
            Some('a') => {
                out.push_str(&v.array.map_or(4_294_967_294, |(_, t)| t as u64).to_string())
            }
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}
