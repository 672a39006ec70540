//! Counts written as English: `1 file`, `2 files`, `0 GPUs`.

/// `n` and the noun, plural unless `n` is 1. The noun is a regular English one (`job`, `file`,
/// `GPU`, `node`): its plural is the noun and an `s`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(super::count(1, "file"), "1 file");
        assert_eq!(super::count(0, "GPU"), "0 GPUs");
        assert_eq!(super::count(21, "job"), "21 jobs");
    }
}
