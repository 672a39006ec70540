//! Output file patterns (`%j`, `%x`…), expanded as Slurm 22.05 expands them
//! (`src/slurmd/slurmstepd/fname.c`).

/// The step id Slurm gives a job's batch script, which `%s` and `%J` print for its output.
pub const BATCH_STEP: u32 = 4_294_967_291;

/// What `%a` prints outside an array (Slurm's `NO_VAL`).
const NO_ARRAY_TASK: u64 = 4_294_967_294;

/// The widest zero padding Slurm honours (`%10j`); a wider one is cut to this.
const MAX_WIDTH: usize = 10;

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
    /// Step id, for `%s` and `%J` ([`BATCH_STEP`] for the batch script).
    pub step: u32,
    /// Task rank within the step, for `%t` (0 for the batch script).
    pub task: u32,
    /// The node's index within the job, for `%n` (0 for the batch script).
    pub node_index: u32,
}

impl<'a> PatternValues<'a> {
    /// The values for a job's batch script, on its first node.
    pub fn batch(
        job_id: u64,
        job_name: &'a str,
        user: &'a str,
        node: &'a str,
        array: Option<(u64, u32)>,
    ) -> Self {
        Self {
            job_id,
            job_name,
            user,
            node,
            array,
            step: BATCH_STEP,
            task: 0,
            node_index: 0,
        }
    }
}

/// Expands an output file pattern as Slurm does: `%j` job id, `%J` job id and step id, `%s`
/// step id, `%t` task rank, `%n` node index, `%N` node name, `%x` job name, `%u` user,
/// `%A`/`%a` array id and index (outside an array `%A` is the job id and `%a` Slurm's
/// 4294967294), `%%` a `%`. A width between `%` and a number's letter zero-pads it (`%4j` →
/// `0042`). A pattern with a backslash anywhere is taken literally, backslashes removed.
///
/// ```
/// use labpool_scheduler::options::{expand_pattern, PatternValues};
/// let v = PatternValues::batch(42, "train", "alice", "gpu1", None);
/// assert_eq!(expand_pattern("logs/%x-%j.out", &v), "logs/train-42.out");
/// assert_eq!(expand_pattern("logs/%5j", &v), "logs/00042");
/// ```
pub fn expand_pattern(pattern: &str, v: &PatternValues<'_>) -> String {
    if pattern.contains('\\') {
        return pattern.replace('\\', "");
    }
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let width = digits.parse::<usize>().unwrap_or(0).min(MAX_WIDTH);
        let number = |n: u64| format!("{n:0width$}");
        match chars.next() {
            Some('j') => out.push_str(&number(v.job_id)),
            Some('J') => {
                out.push_str(&number(v.job_id));
                out.push_str(&format!(".{}", v.step));
            }
            Some('s') => out.push_str(&number(v.step.into())),
            Some('t') => out.push_str(&number(v.task.into())),
            Some('n') => out.push_str(&number(v.node_index.into())),
            Some('A') => out.push_str(&number(v.array.map_or(v.job_id, |(a, _)| a))),
            Some('a') => out.push_str(&number(
                v.array.map_or(NO_ARRAY_TASK, |(_, t)| u64::from(t)),
            )),
            Some('x') => out.push_str(v.job_name),
            Some('u') => out.push_str(v.user),
            Some('N') => out.push_str(v.node),
            Some('%') => out.push('%'),
            // Not a pattern letter: written as it was.
            Some(other) => {
                out.push('%');
                out.push_str(&digits);
                out.push(other);
            }
            None => {
                out.push('%');
                out.push_str(&digits);
            }
        }
    }
    out
}
