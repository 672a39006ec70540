//! Job arrays, as Slurm's `--array=0-9%2`, `--array=1,3,5-7`, `--array=0-15:4`.

use serde::{Deserialize, Serialize};

/// Largest number of tasks in one array (Slurm's default MaxArraySize is 1001).
pub const MAX_ARRAY_TASKS: usize = 1000;

/// An array: its task ids and how many may run at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// Task ids, ascending, without duplicates.
    pub tasks: Vec<u32>,
    /// At most this many tasks run at once (`%N`).
    pub throttle: Option<u32>,
}

/// Why an array spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArrayParseError {
    /// Bad shape.
    #[error(
        "invalid --array '{0}': write ranges and ids such as 0-9, 1,3,5-7 or 0-15:4, optionally with %N to run at most N at once"
    )]
    Malformed(String),
    /// Too many tasks.
    #[error("--array '{text}' makes {count} tasks; the most in one array is {MAX_ARRAY_TASKS}")]
    TooMany {
        /// The spec.
        text: String,
        /// How many it made.
        count: usize,
    },
}

/// Parses an array spec.
///
/// ```
/// use labpool_scheduler::array::parse_array;
/// let a = parse_array("0-9%2").unwrap();
/// assert_eq!((a.tasks.len(), a.throttle), (10, Some(2)));
/// assert_eq!(parse_array("1,3,5-7").unwrap().tasks, [1, 3, 5, 6, 7]);
/// assert_eq!(parse_array("0-15:4").unwrap().tasks, [0, 4, 8, 12]);
/// ```
pub fn parse_array(text: &str) -> Result<ArraySpec, ArrayParseError> {
    let bad = || ArrayParseError::Malformed(text.to_string());
    let (list, throttle) = match text.trim().split_once('%') {
        Some((l, t)) => (l, Some(t.parse::<u32>().map_err(|_| bad())?.max(1))),
        None => (text.trim(), None),
    };
    let mut tasks = Vec::new();
    for item in list.split(',') {
        let (range, step) = match item.split_once(':') {
            Some((r, s)) => (r, s.parse::<u32>().map_err(|_| bad())?),
            None => (item, 1),
        };
        if step == 0 {
            return Err(bad());
        }
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (
                a.parse::<u32>().map_err(|_| bad())?,
                b.parse::<u32>().map_err(|_| bad())?,
            ),
            None => {
                let n = range.parse::<u32>().map_err(|_| bad())?;
                (n, n)
            }
        };
        if hi < lo {
            return Err(bad());
        }
        let count = ((hi - lo) / step) as usize + 1;
        if tasks.len() + count > MAX_ARRAY_TASKS {
            return Err(ArrayParseError::TooMany {
                text: text.to_string(),
                count: tasks.len() + count,
            });
        }
        tasks.extend((lo..=hi).step_by(step as usize));
    }
    tasks.sort_unstable();
    tasks.dedup();
    Ok(ArraySpec { tasks, throttle })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arrays() {
        for bad in ["", "a", "5-1", "0-9%x", "0-9:0", "1,,2"] {
            assert!(parse_array(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            parse_array("0-5000"),
            Err(ArrayParseError::TooMany { .. })
        ));
        assert_eq!(parse_array("3,1,3").unwrap().tasks, [1, 3]);
    }
}
